// A model's outputs and every parameter gradient against its python/seqtrain_torch mirror: the
// mirror from_spec builds from the spec, loaded strict from the model's parameters, run in float64
// by tests/py/transformer_ref.py's model mode on the same x, lengths and dy. Shared by every
// family with a mirror that takes lengths (test_transformer_encoder.cpp, test_cnn.cpp).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "test_util.h"

namespace seqtrain::testing {

// One forward and backward: the output and the whole gradient buffer.
struct ModelResult {
  std::vector<float> y, grads;
};

// The padded batch the encoder tests run: 4 samples of 8 steps and 3 features, lengths 8, 5, 2
// and 7, x and dy [4, 2] drawn from rng in that order.
struct PaddedBatch {
  std::vector<int64_t> lengths{8, 5, 2, 7};
  std::vector<float> x, dy;
  explicit PaddedBatch(Rng& rng) : x(randn(rng, 4 * 8 * 3)), dy(randn(rng, 4 * 2)) {}
};

// One forward and backward of m on x (x_shape, batch first) with `lengths` (empty: none) and dy
// [B, outputs], its gradients zeroed first.
inline ModelResult run_model_pass(Model& m, std::vector<float> x, const Shape& x_shape, std::vector<int64_t> lengths,
                                  const std::vector<float>& dy, bool training = false, uint64_t seed = 0) {
  const int64_t B = x_shape[0];
  Batch batch = batch_of(Tensor(x.data(), x_shape));
  if (!lengths.empty()) batch.lengths = Tensor(lengths.data(), {B}, DType::i64);
  Arena arena;
  StepContext ctx(arena, training, seed);
  ModelResult r;
  const Tensor y = m.forward(batch, ctx);
  r.y.assign(y.f32(), y.f32() + y.numel());
  std::vector<float> g = dy;
  ctx.output_grad = Tensor(g.data(), {B, static_cast<int64_t>(dy.size()) / B});
  m.params().zero_grad();
  m.backward(ctx);
  r.grads.assign(m.params().grads(), m.params().grads() + m.params().size());
  return r;
}

// A PaddedBatch whose values at each sample b's steps from first_unread(lengths[b]) on are redrawn
// (100 times larger): m must give the same output and every parameter gradient, bit for bit, as
// on the batch before (in training mode with `training`: batch statistics leave padding out too). Returns the new batch and m's result on it, for the test's further checks.
template <typename FirstUnread>
std::pair<PaddedBatch, ModelResult> expect_unread_steps(Model& m, Rng& rng, FirstUnread&& first_unread,
                                                        const std::string& what, bool training = false) {
  PaddedBatch p(rng);
  const ModelResult a = run_model_pass(m, p.x, {4, 8, 3}, p.lengths, p.dy, training);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t t = first_unread(p.lengths[static_cast<size_t>(b)]); t < 8; ++t)
      for (int64_t f = 0; f < 3; ++f) p.x[static_cast<size_t>((b * 8 + t) * 3 + f)] = 100.f * rng.normal();
  ModelResult b = run_model_pass(m, p.x, {4, 8, 3}, p.lengths, p.dy, training);
  EXPECT_EQ(a.y, b.y) << what;
  EXPECT_EQ(a.grads, b.grads) << what;
  return {std::move(p), std::move(b)};
}

// x [B, ...] as x_shape, dy [B, outputs]; every number within 1e-5 of its tensor's scale.
// `params` are the weights the pass started from; the mirror runs in train mode, or in eval mode
// with `eval`. Buffers (BatchNorm's running statistics) have no gradient: with `after` (the
// store after seqtrain's pass), their values there are compared with the mirror's after its
// forward instead.
inline void expect_mirror_parity(const ModelSpec& spec, const ParamStore& params, const std::vector<float>& x,
                                 const Shape& x_shape, const std::vector<int64_t>& lengths,
                                 const std::vector<float>& dy, const ModelResult& got, bool eval = false,
                                 const ParamStore* after = nullptr) {
  TempDir dir;
  const int64_t B = x_shape[0];
  save_params(dir / "params.safetensors", params);
  write_npy(dir / "x.npy", x, x_shape);
  write_npy(dir / "dy.npy", dy, {B, static_cast<int64_t>(dy.size()) / B});
  write_npy(dir / "lengths.npy", lengths, {B});
  std::ofstream(dir / "spec.json") << spec_to_json(spec).dump();
  ASSERT_EQ(run_python("transformer_ref.py", "model " + dir.path.string() + (eval ? " --eval" : "")), 0);
  EXPECT_LT(rel_err(got.y, read_npy(dir / "y.npy")), 1e-5) << "y";
  for (const ParamEntry& e : params.entries()) {
    if (e.buffer) {
      if (!after) continue;
      const float* v = after->params() + e.offset;
      EXPECT_LT(rel_err(std::vector<float>(v, v + numel_of(e.shape)), read_npy(dir / ("buf_" + e.name + ".npy"))), 1e-5)
          << e.name;
      continue;
    }
    const std::vector<float> g(got.grads.begin() + e.offset, got.grads.begin() + e.offset + numel_of(e.shape));
    const std::vector<double> want = read_npy(dir / ("grad_" + e.name + ".npy"));
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    // A gradient that is zero in exact arithmetic (a conv bias under training-mode BatchNorm, whose
    // batch mean removes it) is rounding on both sides: held to 1e-6 absolute.
    if (scale < 1e-12) {
      for (float v : g) EXPECT_LT(std::abs(v), 1e-6) << e.name;
      continue;
    }
    EXPECT_LT(rel_err(g, want), 1e-5) << e.name;
  }
}

}  // namespace seqtrain::testing
