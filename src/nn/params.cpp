#include "nn/params.h"

#include <algorithm>

#include "backend/backend.h"

namespace seqtrain {

Backend& ParamStore::backend() const { return backend_ ? *backend_ : default_backend(); }

size_t ParamStore::add(std::string name, Shape shape) {
  ST_CHECK(!finalized_, "parameter '{}' registered after the model was built", name);
  ST_CHECK(!index_.count(name), "parameter '{}' registered twice", name);
  size_t offset = entries_.empty() ? 0 : entries_.back().offset + numel_of(entries_.back().shape);
  index_[name] = entries_.size();
  entries_.push_back({std::move(name), std::move(shape), offset, true});
  return entries_.size() - 1;
}

void ParamStore::add_alias(std::string name, size_t i) {
  ST_CHECK(i < entries_.size(), "alias '{}' of parameter {} which does not exist", name, i);
  ST_CHECK(!index_.count(name), "alias '{}' is already a parameter's name", name);
  for (const auto& a : aliases_) ST_CHECK(a.first != name, "alias '{}' registered twice", name);
  aliases_.emplace_back(std::move(name), i);
}

ParamStore ParamStore::clone_layout() const {
  ParamStore s;
  for (const auto& e : entries_) s.entries_.push_back(e);
  s.index_ = index_;
  s.aliases_ = aliases_;
  s.backend_ = backend_;
  s.finalize();
  return s;
}

void ParamStore::finalize() {
  size_t total = entries_.empty() ? 0 : entries_.back().offset + numel_of(entries_.back().shape);
  params_.assign(total, 0.f);
  grads_.assign(total, 0.f);
  finalized_ = true;
}

const ParamEntry* ParamStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::vector<uint8_t> ParamStore::decay_mask() const {
  std::vector<uint8_t> mask(params_.size(), 1);
  for (const auto& e : entries_)
    if (!e.decay) std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(e.offset), numel_of(e.shape), uint8_t{0});
  return mask;
}

void ParamStore::zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.f); }

}  // namespace seqtrain
