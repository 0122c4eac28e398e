#include "optim/optimizer.h"

#include <cmath>

#include "core/error.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace seqtrain {

OptimizerState Optimizer::state() const {
  OptimizerState s;
  s.step = step_;
  if (!buffers_.empty()) {
    std::vector<std::string> names = buffer_names();
    for (size_t i = 0; i < names.size(); ++i) {
      std::vector<float>& host = s.buffers[names[i]];
      host.resize(buffers_[i].size());
      buffers_[i].download(host);
    }
  }
  return s;
}

void Optimizer::load_state(const OptimizerState& s) {
  ST_CHECK(s.step >= 0, "{} optimizer state has a negative step count ({})", name(), s.step);
  std::vector<std::string> names = buffer_names();
  if (s.buffers.empty() && (s.step == 0 || names.empty())) {
    // Nothing to restore but the count: a checkpoint taken before the first step, or an
    // optimizer (SGD without momentum) that keeps no buffers.
    step_ = s.step;
    buffers_.clear();
    n_ = 0;
    return;
  }
  std::string expected;
  for (const auto& nm : names) expected += (expected.empty() ? "" : ", ") + nm;
  for (const auto& [nm, buf] : s.buffers) {
    bool known = false;
    for (const auto& e : names) known = known || e == nm;
    ST_CHECK(known, "{} optimizer state has an unexpected buffer '{}' (expected: {}); was the "
             "checkpoint written by a different optimizer?", name(), nm, expected.empty() ? "none" : expected);
  }
  std::vector<const std::vector<float>*> loaded;
  size_t n = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = s.buffers.find(names[i]);
    ST_CHECK(it != s.buffers.end(), "{} optimizer state at step {} lacks buffer '{}' (expected: {})",
             name(), s.step, names[i], expected);
    if (i == 0) n = it->second.size();
    ST_CHECK(it->second.size() == n, "{} optimizer state buffer '{}' has {} elements but '{}' has {}; "
             "the checkpoint is inconsistent", name(), names[i], it->second.size(), names[0], n);
    loaded.push_back(&it->second);
  }
  ST_CHECK(decay_mask_.empty() || decay_mask_.size() == n,
           "{} optimizer state holds {} elements but the weight-decay mask has {}", name(), n, decay_mask_.size());
  std::vector<DeviceBuffer> device;
  for (const std::vector<float>* host : loaded) {
    device.emplace_back(*backend_, n, /*zero=*/false);
    device.back().upload(*host);
  }
  buffers_ = std::move(device);
  n_ = n;
  step_ = s.step;
}

void Optimizer::reset() {
  step_ = 0;
  n_ = 0;
  buffers_.clear();
}

void Optimizer::set_decay_mask(std::vector<uint8_t> mask) {
  ST_CHECK(mask.empty() || n_ == 0 || mask.size() == n_,
           "weight-decay mask has {} elements but the optimizer updates {} parameters", mask.size(), n_);
  decay_mask_ = std::move(mask);
  runs_.clear();
  for (size_t i = 0; i < decay_mask_.size(); ++i) {
    const bool d = decay_mask_[i] != 0;
    if (runs_.empty() || runs_.back().decay != d) runs_.push_back({i, i, d});
    runs_.back().end = i + 1;
  }
}

std::vector<Optimizer::DecayRun> Optimizer::decay_runs(size_t n) const {
  if (decay_mask_.empty()) return {DecayRun{0, n, true}};
  return runs_;
}

void Optimizer::begin_step(const float* params, const float* grads, size_t n, double lr) {
  ST_CHECK(n == 0 || (params && grads), "{} step got a null parameter or gradient buffer", name());
  ST_CHECK(std::isfinite(lr) && lr >= 0, "{} step got learning rate {}; it must be finite and >= 0", name(), lr);
  ST_CHECK(decay_mask_.empty() || decay_mask_.size() == n,
           "{} step over {} parameters but the weight-decay mask has {} elements", name(), n, decay_mask_.size());
  if (buffers_.empty()) {
    size_t nb = buffer_names().size();
    for (size_t i = 0; i < nb; ++i) buffers_.emplace_back(*backend_, n);
    n_ = n;
  }
  ST_CHECK(n == n_, "{} step over {} parameters but the optimizer state holds {}; the parameter "
           "buffer changed size after the first step (or the checkpoint is from another model)", name(), n, n_);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& opts, Backend& backend) {
  if (opts.name == "adamw") return std::make_unique<AdamW>(opts, backend);
  if (opts.name == "sgd") return std::make_unique<SGD>(opts, backend);
  fail("unknown optimizer '{}'; expected one of: adamw, sgd", opts.name);
}

}  // namespace seqtrain
