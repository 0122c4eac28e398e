#include "optim/ema.h"

#include <cmath>

#include "core/error.h"

namespace seqtrain {

Ema::Ema(double decay, Backend& backend) : decay_(decay), backend_(&backend) {
  ST_CHECK(std::isfinite(decay) && decay > 0 && decay < 1,
           "train.ema_decay = {} is out of range: the average needs a decay in (0, 1), such as 0.99 or 0.999 (0 "
           "turns the average off)", decay);
}

void Ema::allocate(size_t n) {
  ST_CHECK(n_ == 0 || n_ == n, "internal error: the weight average holds {} parameters and was handed {}", n_, n);
  if (n_ == n) return;
  n_ = n;
  average_ = DeviceBuffer(*backend_, n, false);
  other_ = DeviceBuffer(*backend_, n, false);
}

void Ema::update(const float* params, size_t n) {
  ST_CHECK(!in_use_, "internal error: the weight average was updated while it stood in for the weights");
  allocate(n);
  if (updates_ == 0) {
    backend_->copy(params, average_.data(), n);
  } else {
    // ema + w * (p - ema): the difference first, so where p == ema the average does not move.
    backend_->copy(params, other_.data(), n);
    backend_->axpy(-1.f, average_.data(), other_.data(), n);
    backend_->axpy(static_cast<float>(1.0 - decay_), other_.data(), average_.data(), n);
    for (const auto& [offset, n] : copied_) backend_->copy(params + offset, average_.data() + offset, n);
  }
  ++updates_;
}

std::vector<float> Ema::average() const {
  ST_CHECK(updates_ > 0, "internal error: the weight average has no update yet");
  std::vector<float> host(n_);
  average_.download(host);
  return host;
}

void Ema::load(std::span<const float> average, int64_t updates) {
  ST_CHECK(!in_use_, "internal error: a weight average loaded while it stood in for the weights");
  ST_CHECK(updates >= 0, "internal error: a weight average of {} updates", updates);
  updates_ = updates;
  if (updates == 0) return;
  allocate(average.size());
  average_.upload(average);
}

void Ema::use_average(float* params, size_t n) {
  ST_CHECK(!in_use_, "internal error: the weight average is in use already");
  in_use_ = true;
  if (updates_ == 0) return;
  ST_CHECK(n == n_, "internal error: the weight average holds {} parameters and was handed {}", n_, n);
  backend_->copy(params, other_.data(), n);
  backend_->copy(average_.data(), params, n);
}

void Ema::restore(float* params, size_t n) {
  if (!in_use_) return;
  in_use_ = false;
  if (updates_ == 0) return;
  backend_->copy(other_.data(), params, n);
}

}  // namespace seqtrain
