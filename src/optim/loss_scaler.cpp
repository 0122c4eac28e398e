// LossScaler: torch GradScaler's dynamic loss scaling; see loss_scaler.h.
#include "optim/loss_scaler.h"

#include <cmath>

#include "backend/backend.h"
#include "core/error.h"

namespace seqtrain {

namespace {
constexpr size_t kStateFloats = sizeof(LossScaleState) / sizeof(float);
static_assert(sizeof(LossScaleState) % sizeof(float) == 0);
}  // namespace

LossScaler::LossScaler(const LossScalerOptions& o)
    : rule_{o.growth_factor, o.backoff_factor, o.growth_interval}, backend_(&default_backend()) {
  const float scale = static_cast<float>(o.init);
  ST_CHECK(std::isfinite(o.init) && o.init > 0 && std::isfinite(scale),
           "runtime.loss_scale.init = {} is invalid: use a finite value > 0 (default 65536)", o.init);
  ST_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1,
           "runtime.loss_scale.growth_factor = {} is invalid: use a value > 1 (default 2)", o.growth_factor);
  ST_CHECK(std::isfinite(o.backoff_factor) && o.backoff_factor > 0 && o.backoff_factor < 1,
           "runtime.loss_scale.backoff_factor = {} is invalid: use a value in (0, 1) (default 0.5)", o.backoff_factor);
  ST_CHECK(o.growth_interval >= 1,
           "runtime.loss_scale.growth_interval = {} is invalid: use an integer >= 1 (default 2000)", o.growth_interval);
  buffer_ = DeviceBuffer(*backend_, kStateFloats, /*zero=*/false);
  LossScaleState s;
  s.scale = scale;
  write(s);
}

void LossScaler::use_backend(Backend& backend) {
  if (&backend == backend_) return;
  const LossScaleState s = read();
  backend_ = &backend;
  buffer_ = DeviceBuffer(backend, kStateFloats, /*zero=*/false);
  write(s);
}

// Directly where the host may read the backend's memory (no copy), else one copy.
LossScaleState LossScaler::read() const {
  LossScaleState s;
  if (backend_->host_accessible()) s = *reinterpret_cast<const LossScaleState*>(buffer_.data());
  else backend_->copy_to_host(buffer_.data(), &s, sizeof s);
  return s;
}

void LossScaler::write(const LossScaleState& s) { backend_->copy_from_host(&s, buffer_.data(), sizeof s); }

const float* LossScaler::found_inf() const {
  return &reinterpret_cast<const LossScaleState*>(buffer_.data())->found_inf;
}

void LossScaler::scale_grad(float* dy, size_t n) { backend_->scale_by(dy, n, &state()->scale); }

void LossScaler::unscale(float* g, size_t n) { backend_->unscale_grads(g, n, state()); }

void LossScaler::update() { backend_->update_loss_scale(state(), rule_); }

void LossScaler::update(bool found_inf) {
  const float flag = found_inf ? 1.f : 0.f;
  backend_->copy_from_host(&flag, &state()->found_inf, sizeof flag);
  update();
}

nlohmann::json LossScaler::to_json() const {
  const LossScaleState s = read();
  return {{"scale", s.scale}, {"growth_tracker", s.growth_tracker}, {"skipped_total", s.skipped},
          {"steps_total", s.steps}, {"skipped_reported", reported_}};
}

void LossScaler::load_json(const nlohmann::json& j) {
  ST_CHECK(j.is_object() && j.contains("scale") && j.at("scale").is_number() && j.contains("growth_tracker") &&
               j.at("growth_tracker").is_number_integer(),
           "checkpoint state.json field 'loss_scaler' is malformed ({}); it needs a numeric 'scale' and an integer "
           "'growth_tracker'", j.dump());
  const float scale = j.at("scale").get<float>();
  const int64_t t = j.at("growth_tracker").get<int64_t>();
  ST_CHECK(std::isfinite(scale) && scale > 0 && t >= 0,
           "checkpoint state.json field 'loss_scaler' holds scale {} and growth_tracker {}; both must be positive",
           scale, t);
  LossScaleState s;
  s.scale = scale;
  s.growth_tracker = t;
  s.skipped = j.value("skipped_total", int64_t{0});
  s.steps = j.value("steps_total", int64_t{0});
  reported_ = j.value("skipped_reported", s.skipped);
  write(s);
}

}  // namespace seqtrain
