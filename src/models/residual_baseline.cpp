// The window forecasters' residual baseline. See residual_baseline.h.
#include "models/residual_baseline.h"

#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/seasonal.h"

namespace seqtrain {

ResidualBaseline::ResidualBaseline(const ModelSpec& spec, Backend& backend) : backend_(&backend) {
  if (spec.residual_to == "none") return;
  const int64_t L = spec.lookback, F = spec.input_size, T = static_cast<int64_t>(spec.residual_inputs.size());
  const int64_t m = spec.residual_period, Q = spec.quantile_levels;
  ST_CHECK(T > 0 && Q > 0 && spec.output_size % (T * Q) == 0,
           "model.residual_to {}: the model's {} outputs are not horizon x the {} targets found among the inputs x {} "
           "levels", spec.residual_to, spec.output_size, T, Q);
  ST_CHECK(m >= 1 && m <= L, "model.residual_to {}: the period {} does not fit in the lookback of {} steps",
           spec.residual_to, m, L);
  const int64_t H = spec.output_size / (T * Q);
  in_ = (L + spec.future_steps) * F;  // the known future's rows (if any) select nothing
  out_ = spec.output_size;
  std::vector<float> s(static_cast<size_t>(in_ * out_), 0.f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t f = spec.residual_inputs[t];
      ST_CHECK(0 <= f && f < F, "model.residual_to: target input {} is not one of the {} features", f, F);
      const int64_t step = seasonal_source_step(L, m, h);
      // Into the first level only: the later ones are built on it (models/quantile_output.h).
      s[static_cast<size_t>((step * F + f) * out_ + (h * T + t) * Q)] = 1.f;
    }
  select_ = DeviceBuffer(backend, s.size(), false);
  select_.upload(s);
}

void ResidualBaseline::add_to(const Tensor& x, Tensor& out) {
  if (!active()) return;
  ST_CHECK(x.dtype == DType::f32 && x.numel() % in_ == 0 && out.numel() == x.numel() / in_ * out_,
           "model.residual_to: inputs of {} values and outputs of {} do not fit windows of {} inputs and {} outputs",
           x.numel(), out.numel(), in_, out_);
  const int64_t B = x.numel() / in_;
  backend_->gemm(DType::f32, false, false, B, out_, in_, 1.f, x.f32(), in_, select_.data(), out_, 1.f, out.f32(), out_);
}

}  // namespace seqtrain
