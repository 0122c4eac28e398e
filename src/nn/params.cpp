#include "nn/params.h"

#include <algorithm>
#include <new>

#include "backend/backend.h"
#include "core/system.h"

namespace seqtrain {

Backend& ParamStore::backend() const { return backend_ ? *backend_ : default_backend(); }

void ParamStore::set_backend(Backend& b) {
  ST_CHECK(!finalized_ || &b == backend_,
           "the parameters' backend must be chosen before the model is built (ParamStore::finalize allocated them "
           "on the {} backend; {} asked for afterwards)", backend().name(), b.name());
  backend_ = &b;
}

bool ParamStore::host_accessible() const { return backend().host_accessible(); }

namespace {
constexpr const char* kSmaller = "make it smaller (model.hidden, model.layers, model.embed_size, data.npy.classes ...)";

// A model too big for this machine is refused as its parameters are registered, before a layer
// allocates its own copies of them (a bad_alloc, or the OOM killer once they are touched).
// Training holds four copies (the weights, their gradients and AdamW's two moments), so that is
// what must fit; below 1 GiB of them nothing is asked of /proc/meminfo.
void check_fits_host(size_t total, const std::string& name) {
  const double bytes = 4.0 * static_cast<double>(total) * sizeof(float);
  if (bytes < static_cast<double>(1 << 30)) return;
  const double room = static_cast<double>(system_available_ram());
  ST_CHECK(room <= 0 || bytes <= room,
           "the model has {} parameters with '{}': its weights, gradients and AdamW moments need {:.1f} GiB but this "
           "machine has {:.1f} GiB available; {}",
           total, name, bytes / (1 << 30), room / (1 << 30), kSmaller);
}
}  // namespace

size_t ParamStore::add(std::string name, Shape shape) {
  ST_CHECK(!finalized_, "parameter '{}' registered after the model was built", name);
  ST_CHECK(!index_.count(name), "parameter '{}' registered twice", name);
  size_t offset = entries_.empty() ? 0 : entries_.back().offset + numel_of(entries_.back().shape);
  check_fits_host(offset + static_cast<size_t>(numel_of(shape)), name);
  index_[name] = entries_.size();
  entries_.push_back({std::move(name), std::move(shape), offset, true});
  return entries_.size() - 1;
}

size_t ParamStore::add_buffer(std::string name, Shape shape) {
  const size_t i = add(std::move(name), std::move(shape));
  entries_[i].buffer = entries_[i].frozen = true;
  entries_[i].decay = false;
  return i;
}

std::vector<std::pair<size_t, size_t>> ParamStore::buffer_ranges() const {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& e : entries_)
    if (e.buffer) ranges.emplace_back(e.offset, static_cast<size_t>(numel_of(e.shape)));
  return ranges;
}

void ParamStore::add_alias(std::string name, size_t i) {
  ST_CHECK(i < entries_.size(), "alias '{}' of parameter {} which does not exist", name, i);
  ST_CHECK(!index_.count(name), "alias '{}' is already a parameter's name", name);
  for (const auto& a : aliases_) ST_CHECK(a.first != name, "alias '{}' registered twice", name);
  aliases_.emplace_back(std::move(name), i);
}

ParamStore ParamStore::clone_layout(Backend& on) const {
  ParamStore s;
  s.entries_ = entries_;
  s.index_ = index_;
  s.aliases_ = aliases_;
  s.backend_ = &on;
  s.finalize();
  return s;
}

void ParamStore::finalize() {
  check_not_staged("finalize");
  backend_ = &backend();  // the buffers belong to this backend from now on
  size_ = entries_.empty() ? 0 : entries_.back().offset + numel_of(entries_.back().shape);
  // The host's memory was checked as the entries came (check_fits_host); a device's is here.
  const double bytes = 2.0 * static_cast<double>(size_) * sizeof(float);
  const double room = backend_->host_accessible() ? 0.0 : static_cast<double>(backend_->device_free_bytes());
  ST_CHECK(room <= 0 || bytes <= room,
           "the model has {} parameters: its weights and gradients need {:.1f} GiB (training with AdamW {:.1f} GiB) "
           "but {} has {:.1f} GiB available; {}",
           size_, bytes / (1 << 30), 2 * bytes / (1 << 30), backend_->name(), room / (1 << 30), kSmaller);
  try {
    params_ = DeviceBuffer(*backend_, size_);
    grads_ = DeviceBuffer(*backend_, size_);
  } catch (const std::bad_alloc&) {
    fail("the model has {} parameters, and {} could not allocate the {:.1f} GiB of its weights and gradients; {}",
         size_, backend_->name(), bytes / (1 << 30), kSmaller);
  }
  finalized_ = true;
}

const ParamEntry* ParamStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::vector<uint8_t> ParamStore::decay_mask() const {
  std::vector<uint8_t> mask(size_, 1);
  for (const auto& e : entries_)
    if (!e.decay) std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(e.offset), numel_of(e.shape), uint8_t{0});
  return mask;
}

bool ParamStore::all_frozen(std::string_view prefix) const {
  for (const auto& e : entries_)
    if (!e.frozen && std::string_view(e.name).substr(0, prefix.size()) == prefix) return false;
  return true;
}

void ParamStore::zero_frozen_grads() {
  // Neighbouring frozen entries are one fill.
  size_t begin = 0, end = 0;
  for (const auto& e : entries_) {
    if (!e.frozen) continue;
    const size_t b = e.offset, n = static_cast<size_t>(numel_of(e.shape));
    if (end != begin && b == end) {
      end += n;
      continue;
    }
    if (end != begin) backend().fill(grads_.data() + begin, end - begin, 0.f);
    begin = b;
    end = b + n;
  }
  if (end != begin) backend().fill(grads_.data() + begin, end - begin, 0.f);
}

void ParamStore::zero_grad() {
  if (size_) backend().fill(grads_.data(), size_, 0.f);
}

void ParamStore::check_not_staged(const char* what) const {
  ST_CHECK(!staged_, "ParamStore::{} inside a HostParams scope: commit the staged parameters first", what);
}

void ParamStore::read_params(std::span<float> dst, size_t offset) const {
  check_not_staged("read_params");
  params_.download(dst, offset);
}

void ParamStore::write_params(std::span<const float> src, size_t offset) {
  check_not_staged("write_params");
  params_.upload(src, offset);
}

HostReadView ParamStore::read_view() const {
  check_not_staged("read_view");
  return HostReadView(backend(), params_.data(), size_);
}

ParamStore::HostParams::HostParams(ParamStore& store) : store_(store) {
  store.check_not_staged("HostParams");
  if (store.host_accessible() || store.size_ == 0) return;
  copy_.resize(store.size_);
  store.params_.download(copy_);
  store.staged_ = copy_.data();
}

ParamStore::HostParams::~HostParams() {
  if (store_.staged_ == copy_.data()) store_.staged_ = nullptr;  // not committed: the device keeps its values
}

void ParamStore::HostParams::commit() {
  if (!store_.staged_ || store_.staged_ != copy_.data()) return;
  store_.staged_ = nullptr;
  store_.params_.upload(copy_);
}

}  // namespace seqtrain
