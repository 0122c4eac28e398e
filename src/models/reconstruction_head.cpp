// ReconstructionHead forward/backward. See reconstruction_head.h.
#include "models/reconstruction_head.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace seqtrain {
namespace {
constexpr double kVarEps = 1e-4;  // VICReg's: the std of a collapsed dimension stays differentiable
}  // namespace

ReconstructionHead::ReconstructionHead(ParamStore& params, const ModelSpec& spec, int64_t width, int64_t per_token)
    : params_(params),
      features_(spec.input_size),
      penalty_weight_(spec.std_penalty),
      token_(spec.mask_fill == "token" ? std::optional<size_t>(params.add("mask_token", {spec.input_size}))
                                       : std::nullopt),
      norm_(params, "decoder.norm", width),
      fc1_(params, "decoder.fc1", width, width),
      gelu_(ActKind::gelu, &params.backend()),
      fc2_(params, "decoder.fc2", width, per_token) {
  ST_CHECK(spec.mask_fill == "token" || spec.mask_fill == "zero",
           "config key 'train.masking.fill' is {}: use token or zero", spec.mask_fill);
}

// The token starts at 0, the value of a z-scored feature's mean: masked steps begin as "average",
// and learn from there. The decoder has torch's defaults.
void ReconstructionHead::init(Rng& rng) {
  if (token_) std::fill_n(params_.param(*token_).f32(), features_, 0.f);
  norm_.init();
  fc1_.init(rng);
  fc2_.init(rng);
}

Tensor ReconstructionHead::mask_inputs(const Batch& batch, Arena& arena) {
  mask_ = nullptr;
  if (batch.loss_mask.ptr == nullptr || batch.loss_mask.numel() == 0) return batch.inputs;
  Backend& be = params_.backend();
  ST_CHECK(be.host_accessible(), "train.task masked_pretrain runs on the CPU for now; the {} backend has no masking "
           "op: set runtime.device: cpu", be.name());
  const Tensor& x = batch.inputs;
  ST_CHECK(x.dtype == DType::f32 && batch.loss_mask.numel() == x.numel() && x.dim(x.shape.size() - 1) == features_,
           "masked pretraining: the loss mask {} does not match the inputs {}", shape_str(batch.loss_mask.shape),
           shape_str(x.shape));
  mask_ = batch.loss_mask.f32();
  Tensor out = arena.tensor(x.shape);
  const float* xs = x.f32();
  const float* fill = token_ ? params_.param(*token_).f32() : nullptr;
  float* o = out.f32();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; i += features_)
    for (int64_t f = 0; f < features_; ++f)
      o[i + f] = mask_[i + f] != 0.f ? (fill ? fill[f] : 0.f) : xs[i + f];
  return out;
}

Tensor ReconstructionHead::forward(const Tensor& h, const Shape& input_shape, std::span<const int64_t> valid,
                                   StepContext& ctx) {
  Arena& arena = ctx.arena;
  rows_ = 0;
  if (ctx.training && penalty_weight_ > 0) ctx.aux_loss = penalty_weight_ * penalty_forward(h, valid);
  Tensor out = fc2_.forward(gelu_.forward(fc1_.forward(norm_.forward(h, arena), arena), arena), arena);
  ST_CHECK(out.numel() == numel_of(input_shape), "masked pretraining: the decoder gives {} values for inputs {}",
           shape_str(out.shape), shape_str(input_shape));
  out_shape_ = out.shape;
  return out.reshape(input_shape);
}

Tensor ReconstructionHead::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  Tensor dh = norm_.backward(
      fc1_.backward(gelu_.backward(fc2_.backward(ctx.output_grad.reshape(out_shape_), arena), arena), arena), arena);
  if (rows_ > 0 && ctx.aux_weight != 0) penalty_backward(dh, ctx.aux_weight * penalty_weight_);
  return dh;
}

void ReconstructionHead::input_backward(const Tensor& dx) {
  if (!wants_input_grad()) return;
  float* g = params_.grad(*token_).f32();
  const float* d = dx.f32();
  const int64_t n = dx.numel();
  for (int64_t i = 0; i < n; i += features_)
    for (int64_t f = 0; f < features_; ++f)
      if (mask_[i + f] != 0.f) g[f] += d[i + f];
}

// mean over dimensions of relu(1 - std), the std over the valid rows of h [B, N, C].
double ReconstructionHead::penalty_forward(const Tensor& h, std::span<const int64_t> valid) {
  Backend& be = params_.backend();
  ST_CHECK(be.host_accessible(), "train.masking.std_penalty runs on the CPU for now; the {} backend has none: set "
           "runtime.device: cpu or train.masking.std_penalty: 0", be.name());
  const int64_t C = h.dim(2);
  h_ = h;
  valid_.assign(valid.begin(), valid.end());
  mean_.assign(static_cast<size_t>(C), 0.0);
  std::vector<double> sq(static_cast<size_t>(C), 0.0);
  rows_ = 0;
  for_each_valid_row([&](const float* r, float*) {
    ++rows_;
    for (int64_t c = 0; c < C; ++c) mean_[static_cast<size_t>(c)] += r[c];
  });
  for (double& m : mean_) m /= static_cast<double>(rows_);
  for_each_valid_row([&](const float* r, float*) {
    for (int64_t c = 0; c < C; ++c) {
      const double d = r[c] - mean_[static_cast<size_t>(c)];
      sq[static_cast<size_t>(c)] += d * d;
    }
  });
  active_inv_std_.assign(static_cast<size_t>(C), 0.0);
  double penalty = 0;
  for (int64_t c = 0; c < C; ++c) {
    const double sd = std::sqrt(sq[static_cast<size_t>(c)] / static_cast<double>(rows_) + kVarEps);
    if (sd < 1.0) {
      penalty += 1.0 - sd;
      active_inv_std_[static_cast<size_t>(c)] = 1.0 / sd;
    }
  }
  return penalty / static_cast<double>(C);
}

// d/dh[r, c] of weight * mean_c relu(1 - std_c) = -weight / C * (h[r, c] - mean_c) / (R std_c)
// where the relu is active (the mean's own gradient sums to zero over the rows).
void ReconstructionHead::penalty_backward(Tensor dh, double weight) const {
  const int64_t C = h_.dim(2);
  const double k = -weight / static_cast<double>(C) / static_cast<double>(rows_);
  for_each_valid_row(
      [&](const float* r, float* d) {
        for (int64_t c = 0; c < C; ++c) {
          const double s = active_inv_std_[static_cast<size_t>(c)];
          if (s != 0) d[c] += static_cast<float>(k * (r[c] - mean_[static_cast<size_t>(c)]) * s);
        }
      },
      &dh);
}

}  // namespace seqtrain
