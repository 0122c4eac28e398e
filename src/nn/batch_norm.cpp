// BatchNorm forward/backward over the Backend's batch_norm op (backend.h has the formulas). See
// batch_norm.h.
#include "nn/batch_norm.h"

#include "core/trace.h"

namespace seqtrain {

BatchNorm::BatchNorm(ParamStore& p, const std::string& prefix_, int64_t channels_)
    : params(p), prefix(prefix_), channels(channels_) {
  ST_CHECK(channels > 0, "BatchNorm '{}': {} channels must be positive", prefix, channels);
  p.backend().require(BackendOp::batch_norm, "(BatchNorm '" + prefix + "')");
  weight = params.add(prefix + ".weight", {channels});
  bias = params.add(prefix + ".bias", {channels});
  running_mean = params.add_buffer(prefix + ".running_mean", {channels});
  running_var = params.add_buffer(prefix + ".running_var", {channels});
  num_batches_tracked = params.add_buffer(prefix + ".num_batches_tracked", {});
}

void BatchNorm::init() {
  float* w = params.param(weight).f32();
  float* b = params.param(bias).f32();
  float* m = params.param(running_mean).f32();
  float* v = params.param(running_var).f32();
  for (int64_t i = 0; i < channels; ++i) {
    w[i] = 1.f;
    b[i] = 0.f;
    m[i] = 0.f;
    v[i] = 1.f;
  }
  *params.param(num_batches_tracked).f32() = 0.f;
}

Tensor BatchNorm::forward(const Tensor& x, const uint8_t* mask, int64_t count, bool training, Arena& arena) {
  ST_TRACE("batch_norm.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(!x.shape.empty() && x.dim(-1) == channels && x.contiguous(),
           "BatchNorm '{}': input {} does not match {} channels: expected a contiguous [..., {}]", prefix,
           shape_str(x.shape), channels, channels);
  const int64_t rows = x.numel() / channels;
  // Frozen BatchNorm (batch_norm.h): a frozen weight runs on the running statistics.
  const bool batch_stats = training && !params.entries()[weight].frozen;
  ST_CHECK(!batch_stats || count > 1,
           "BatchNorm '{}' (model.norm batch): a training batch with {} valid step(s) has no variance to normalise "
           "by (torch: expected more than 1 value per channel when training); use a larger train.batch_size, or "
           "model.norm layer", prefix, count);
  args_ = BatchNormArgs{.rows = rows, .channels = channels, .count = count, .eps = kEps, .momentum = kMomentum,
                        .training = batch_stats, .x = x.f32(), .mask = mask, .weight = params.param(weight).f32(),
                        .bias = params.param(bias).f32(),
                        .mean = static_cast<float*>(arena.alloc(sizeof(float) * channels)),
                        .rstd = static_cast<float*>(arena.alloc(sizeof(float) * channels)),
                        .running_mean = params.param(running_mean).f32(),
                        .running_var = params.param(running_var).f32(),
                        .num_batches_tracked = params.param(num_batches_tracked).f32()};
  shape_ = x.shape;
  Tensor y = arena.tensor(x.shape);
  if (rows > 0) params.backend().batch_norm_forward(args_, y.f32());
  return y;
}

Tensor BatchNorm::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("batch_norm.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(args_.x != nullptr, "BatchNorm '{}': backward called before forward", prefix);
  ST_CHECK(dy.shape == shape_ && dy.contiguous(), "BatchNorm '{}': gradient {} does not match the input {}", prefix,
           shape_str(dy.shape), shape_str(shape_));
  Tensor dx = arena.tensor(shape_);
  const std::vector<ParamEntry>& e = params.entries();
  if (args_.rows > 0)
    params.backend().batch_norm_backward(args_, dy.f32(), dx.f32(),
                                         e[weight].frozen ? nullptr : params.grad(weight).f32(),
                                         e[bias].frozen ? nullptr : params.grad(bias).f32());
  return dx;
}

}  // namespace seqtrain
