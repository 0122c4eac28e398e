// LossScaler: torch GradScaler's dynamic loss scaling; see loss_scaler.h.
#include "optim/loss_scaler.h"

#include <cmath>

#include "backend/backend.h"
#include "core/error.h"
#include "optim/optimizer.h"

namespace seqtrain {

LossScaler::LossScaler(const LossScalerOptions& o) : opts_(o), scale_(static_cast<float>(o.init)) {
  ST_CHECK(std::isfinite(o.init) && o.init > 0 && std::isfinite(scale_),
           "runtime.loss_scale.init = {} is invalid: use a finite value > 0 (default 65536)", o.init);
  ST_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1,
           "runtime.loss_scale.growth_factor = {} is invalid: use a value > 1 (default 2)", o.growth_factor);
  ST_CHECK(std::isfinite(o.backoff_factor) && o.backoff_factor > 0 && o.backoff_factor < 1,
           "runtime.loss_scale.backoff_factor = {} is invalid: use a value in (0, 1) (default 0.5)", o.backoff_factor);
  ST_CHECK(o.growth_interval >= 1,
           "runtime.loss_scale.growth_interval = {} is invalid: use an integer >= 1 (default 2000)", o.growth_interval);
}

bool LossScaler::unscale(float* g, size_t n) const {
  const float inv = inverse();
  const int64_t len = static_cast<int64_t>(n);
  int bad = 0;
  // x - x is 0 for finite x and NaN for inf or NaN: a branch-free finite test that vectorizes.
#pragma omp parallel for simd reduction(| : bad) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < len; ++i) {
    const float v = g[i] * inv;
    g[i] = v;
    bad |= (v - v) != 0.f;
  }
  return bad == 0;
}

bool LossScaler::unscale(Backend& backend, float* g, size_t n) const {
  if (backend.host_accessible()) return unscale(g, n);
  backend.scale(g, n, inverse());
  return std::isfinite(backend.l2_norm(g, n));
}

void LossScaler::update(bool found_inf) {
  ++steps_;
  if (found_inf) {
    scale_ = static_cast<float>(scale_ * opts_.backoff_factor);
    growth_tracker_ = 0;
    ++skipped_;
    return;
  }
  if (++growth_tracker_ == opts_.growth_interval) {
    const float grown = static_cast<float>(scale_ * opts_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
}

nlohmann::json LossScaler::to_json() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_}, {"skipped_total", skipped_}, {"steps_total", steps_},
          {"skipped_reported", reported_}};
}

void LossScaler::load_json(const nlohmann::json& j) {
  ST_CHECK(j.is_object() && j.contains("scale") && j.at("scale").is_number() && j.contains("growth_tracker") &&
               j.at("growth_tracker").is_number_integer(),
           "checkpoint state.json field 'loss_scaler' is malformed ({}); it needs a numeric 'scale' and an integer "
           "'growth_tracker'", j.dump());
  const float s = j.at("scale").get<float>();
  const int64_t t = j.at("growth_tracker").get<int64_t>();
  ST_CHECK(std::isfinite(s) && s > 0 && t >= 0,
           "checkpoint state.json field 'loss_scaler' holds scale {} and growth_tracker {}; both must be positive",
           s, t);
  scale_ = s;
  growth_tracker_ = t;
  skipped_ = j.value("skipped_total", int64_t{0});
  steps_ = j.value("steps_total", int64_t{0});
  reported_ = j.value("skipped_reported", skipped_);
}

}  // namespace seqtrain
