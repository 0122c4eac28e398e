// The CUDA backend's recurrent layers (backend/cuda/cuda_rnn.cpp, cuDNN's RNN API) held to the
// reference backend's (PyTorch's equations, fp64 accumulation): LSTM and GRU, one and two
// directions, a stack of two layers of different input widths (layer 1 reads layer 0's output,
// as RnnStack runs them, and the two as one cuDNN stack), forward y and backward dx, dW, db;
// gradients added on a second step;
// the inference forward; per-sample lengths (cuDNN's padded layout); the bf16 / fp16 layers to
// 16-bit rounding; the refusal of checkpointing. Every test needs a
// GPU and skips without one.
//
// Tolerance: 1e-4 of each tensor's largest magnitude (test_backend.cpp's scaled error). cuDNN
// runs strict fp32 (CUDNN_FMA_MATH, no TF32) with fp32 accumulation and its own GEMM order and
// transcendentals; the reference accumulates in fp64. One fp32 dot product here (K <= 27) is off
// by ~sqrt(K) 2^-24 ~ 1e-6 relative; seven recurrent steps and two layers compound that and the
// device's exp/tanh add a few ulps each, which leaves 1e-4 a margin of tens without letting a
// wrong gate order or a dropped bias through (those move results by O(1); a 1e-2 nudge of one
// bias is shown to exceed the tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/autotune.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

constexpr double kTol = 1e-4;
constexpr int64_t T = 7, N = 5, C = 6, H = 9;

std::vector<float> random_values(Rng& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

// testing::scaled_err with a 1e-12 floor (all-zero references stay finite).
double scaled_error(const std::vector<float>& a, const std::vector<float>& b) { return scaled_err(a, b, 1e-12); }

Backend& reference() { return backend_named("reference"); }

// The two-layer stack's shapes: layer 1's input is layer 0's output [T, N, H * dirs].
struct Stack {
  RnnCell cell;
  int64_t dirs;
  int64_t gh() const { return rnn_gates(cell) * H; }
  int64_t input(int k) const { return k == 0 ? C : H * dirs; }
  // One direction's W_ih, W_hh, b_ih, b_hh, back to back.
  int64_t per_dir(int k) const { return gh() * input(k) + gh() * H + 2 * gh(); }
  int64_t params(int k) const { return dirs * per_dir(k); }
  int64_t y_size() const { return T * N * H * dirs; }
  RecurrentSpec spec() const { return RecurrentSpec{cell, H, dirs, {input(0), input(1)}, {}}; }

  // Points w at the parameters `p` and gradients `g` of layer k (host or device pointers alike).
  RecurrentWeights weights(int k, const float* p, float* g) const {
    RecurrentWeights w;
    const int64_t c = input(k);
    for (int64_t d = 0; d < dirs; ++d) {
      const float* b = p + d * per_dir(k);
      float* gb = g + d * per_dir(k);
      w.w_ih[d] = b; w.w_hh[d] = b + gh() * c; w.b_ih[d] = b + gh() * (c + H); w.b_hh[d] = w.b_ih[d] + gh();
      w.dw_ih[d] = gb; w.dw_hh[d] = gb + gh() * c; w.db_ih[d] = gb + gh() * (c + H); w.db_hh[d] = w.db_ih[d] + gh();
    }
    return w;
  }
};

// What the tests compare: the outputs and the input gradients of both layers, the gradients
// summed over all steps run.
struct Results {
  std::vector<float> y[2], dx[2], grads[2];
};

struct Inputs {
  std::vector<float> params[2], x, dy;  // dy: the top layer's output gradient
};

Inputs random_inputs(const Stack& s, uint64_t seed) {
  Rng rng(seed);
  Inputs in;
  for (int k = 0; k < 2; ++k) in.params[k] = random_values(rng, s.params(k), -0.4f, 0.4f);
  in.x = random_values(rng, T * N * C);
  in.dy = random_values(rng, s.y_size());
  return in;
}

// The reference: host memory throughout.
Results run_reference(const Stack& s, const Inputs& in, std::span<const int64_t> lengths = {}) {
  auto layers = reference().make_recurrent(s.spec());
  Results r;
  Arena arena;
  std::vector<float> x = in.x, dy = in.dy;
  const Shape y_shape{T, N, H * s.dirs};
  for (int k = 0; k < 2; ++k) {
    r.grads[k].assign(s.params(k), 0.f);
    r.y[k].assign(s.y_size(), 0.f);
  }
  layers->forward(0, s.weights(0, in.params[0].data(), r.grads[0].data()), Tensor(x.data(), {T, N, C}),
                  Tensor(r.y[0].data(), y_shape), arena, true, lengths);
  layers->forward(1, s.weights(1, in.params[1].data(), r.grads[1].data()), Tensor(r.y[0].data(), y_shape),
                  Tensor(r.y[1].data(), y_shape), arena, true, lengths);
  Tensor dx1 = layers->backward(1, s.weights(1, in.params[1].data(), r.grads[1].data()),
                                Tensor(dy.data(), y_shape), arena, true);
  r.dx[1].assign(dx1.f32(), dx1.f32() + dx1.numel());
  Tensor dx0 = layers->backward(0, s.weights(0, in.params[0].data(), r.grads[0].data()), dx1, arena, true);
  r.dx[0].assign(dx0.f32(), dx0.f32() + dx0.numel());
  return r;
}

// A Tensor a CUDA backward returned, on the host. The layers write dx into the arena's memory,
// which is host memory until the activation Arena allocates through the backend (a known gap;
// cuda_rnn.cpp then copies dx there) and device memory after. copy_to_host accepts only this
// backend's allocations and is an Error for anything else, so an Error here means host memory,
// read directly; the test is correct before and after the seam lands.
std::vector<float> read_back(Backend& gpu, const Tensor& t) {
  std::vector<float> host(t.numel());
  try {
    gpu.copy_to_host(t.ptr, host.data(), t.nbytes());
  } catch (const Error&) {
    const float* p = t.f32();
    host.assign(p, p + t.numel());
  }
  return host;
}

// The GPU: x, y, dy, parameters and gradients in device memory. `steps` forward + backward
// passes of the same batch; dx of the bottom layer is asked for on the first only (RnnStack
// asks for none there; the second pass runs that path).
Results run_cuda(Backend& gpu, const Stack& s, const Inputs& in, int steps, const Precision& precision = {},
                 std::span<const int64_t> lengths = {}) {
  RecurrentSpec spec = s.spec();
  spec.options.precision = precision;
  auto layers = gpu.make_recurrent(spec);
  const Shape y_shape{T, N, H * s.dirs};
  DeviceArray<float> x(gpu, in.x), dy(gpu, in.dy), dy0(gpu, s.y_size());
  DeviceArray<float> p0(gpu, in.params[0]), p1(gpu, in.params[1]);
  DeviceArray<float> g0(gpu, std::vector<float>(s.params(0), 0.f)), g1(gpu, std::vector<float>(s.params(1), 0.f));
  DeviceArray<float> y0(gpu, s.y_size()), y1(gpu, s.y_size());
  const RecurrentWeights w0 = s.weights(0, p0.get(), g0.get()), w1 = s.weights(1, p1.get(), g1.get());
  Results r;
  Arena arena;
  for (int step = 0; step < steps; ++step) {
    arena.reset();
    layers->forward(0, w0, Tensor(x.get(), {T, N, C}), Tensor(y0.get(), y_shape), arena, true, lengths);
    layers->forward(1, w1, Tensor(y0.get(), y_shape), Tensor(y1.get(), y_shape), arena, true, lengths);
    const Tensor dx1 = layers->backward(1, w1, Tensor(dy.get(), y_shape), arena, true);
    r.dx[1] = read_back(gpu, dx1);
    dy0.upload(r.dx[1]);  // wherever dx1 lives, layer 0's backward reads device memory
    const bool want_dx = step == 0;
    const Tensor dx0 = layers->backward(0, w0, Tensor(dy0.get(), y_shape), arena, want_dx);
    EXPECT_EQ(dx0.ptr != nullptr, want_dx);
    if (want_dx) r.dx[0] = read_back(gpu, dx0);
  }
  r.y[0] = y0.download();
  r.y[1] = y1.download();
  r.grads[0] = g0.download();
  r.grads[1] = g1.download();
  return r;
}

// SEQTRAIN_CUDNN_RNN_STACK set for one scope (the layers read it when made).
class StackPlanEnv {
 public:
  explicit StackPlanEnv(const char* plan) { setenv("SEQTRAIN_CUDNN_RNN_STACK", plan, 1); }
  ~StackPlanEnv() { unsetenv("SEQTRAIN_CUDNN_RNN_STACK"); }
};

// The stack through forward_stack / backward_stack, as `plan` (whole: cuDNN's two-layer RNN in
// one call; layers: a call per layer inside the backend), `steps` passes of the same batch with
// the bottom dx asked for: y[1], dx[0] and both layers' gradients are filled (the stack keeps no
// layer-0 output or layer-1 dx for the caller).
Results run_cuda_stack(Backend& gpu, const Stack& s, const Inputs& in, int steps, const Precision& precision = {},
                       std::span<const int64_t> lengths = {}, const char* plan = "whole") {
  RecurrentSpec spec = s.spec();
  spec.options.precision = precision;
  const StackPlanEnv env(plan);
  auto layers = gpu.make_recurrent(spec);
  EXPECT_TRUE(layers->runs_stack());
  const Shape y_shape{T, N, H * s.dirs};
  DeviceArray<float> x(gpu, in.x), dy(gpu, in.dy), y(gpu, s.y_size());
  DeviceArray<float> p0(gpu, in.params[0]), p1(gpu, in.params[1]);
  DeviceArray<float> g0(gpu, std::vector<float>(s.params(0), 0.f)), g1(gpu, std::vector<float>(s.params(1), 0.f));
  const RecurrentWeights w[2] = {s.weights(0, p0.get(), g0.get()), s.weights(1, p1.get(), g1.get())};
  Results r;
  Arena arena(gpu);  // device memory, as a training step's: the per-layer plan hands layers over in it
  for (int step = 0; step < steps; ++step) {
    arena.reset();
    layers->forward_stack(w, Tensor(x.get(), {T, N, C}), Tensor(y.get(), y_shape), arena, true, lengths);
    r.dx[0] = read_back(gpu, layers->backward_stack(w, Tensor(dy.get(), y_shape), arena, true));
  }
  r.y[1] = y.download();
  r.grads[0] = g0.download();
  r.grads[1] = g1.download();
  return r;
}

std::vector<float> times(std::vector<float> v, float s) {
  for (auto& x : v) x *= s;
  return v;
}

class CudaRnnLayers : public ::testing::TestWithParam<Stack> {};

TEST_P(CudaRnnLayers, ForwardAndBackwardAgreeWithTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const Stack s = GetParam();
  const Inputs in = random_inputs(s, 11);
  const Results want = run_reference(s, in);
  const Results got = run_cuda(gpu, s, in, 1);
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(::testing::Message() << "layer " << k);
    EXPECT_LT(scaled_error(got.y[k], want.y[k]), kTol);
    EXPECT_LT(scaled_error(got.dx[k], want.dx[k]), kTol);
    EXPECT_LT(scaled_error(got.grads[k], want.grads[k]), kTol);
  }
  // The comparison can fail: the top layer's input bias of one cell-candidate unit (LSTM g, GRU
  // n) moved by 1e-2 moves y by ~1e-3 of its scale, ten times the tolerance.
  Inputs nudged = in;
  nudged.params[1][s.gh() * (s.input(1) + H) + 2 * H] += 1e-2f;
  const Results other = run_reference(s, nudged);
  EXPECT_GT(scaled_error(got.y[1], other.y[1]), kTol);
}

// Backward adds to the gradients: two steps on one batch give twice one step's gradients, and
// the second step's outputs and dx are the first's (nothing else leaks from step to step).
TEST_P(CudaRnnLayers, GradientsAreAddedAcrossSteps) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const Stack s = GetParam();
  const Inputs in = random_inputs(s, 12);
  const Results want = run_reference(s, in);
  const Results got = run_cuda(gpu, s, in, 2);
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(::testing::Message() << "layer " << k);
    EXPECT_LT(scaled_error(got.grads[k], times(want.grads[k], 2.f)), kTol);
    EXPECT_LT(scaled_error(got.y[k], want.y[k]), kTol);
  }
  EXPECT_LT(scaled_error(got.dx[1], want.dx[1]), kTol);
}

// Per-sample lengths (all different, 1 and T among them): cuDNN's padded layout with each
// sample's seqLengthArray runs PyTorch's packed sequences, as the reference does: y zero at
// padded steps, the reverse direction from each sample's last valid step, dx zero at padding.
TEST_P(CudaRnnLayers, LengthsAgreeWithTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const Stack s = GetParam();
  const std::vector<int64_t> lengths = {4, 1, 7, 6, 2};
  ASSERT_EQ(static_cast<int64_t>(lengths.size()), N);
  const Inputs in = random_inputs(s, 15);
  const Results want = run_reference(s, in, lengths);
  const Results got = run_cuda(gpu, s, in, 1, {}, lengths);
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(::testing::Message() << "layer " << k);
    EXPECT_LT(scaled_error(got.y[k], want.y[k]), kTol);
    EXPECT_LT(scaled_error(got.dx[k], want.dx[k]), kTol);
    EXPECT_LT(scaled_error(got.grads[k], want.grads[k]), kTol);
  }
  // Lengths change the result (the comparison is not of two full-length runs).
  EXPECT_GT(scaled_error(got.y[1], run_reference(s, in).y[1]), kTol);
}

// The whole stack in one cuDNN call computes what the layers one at a time do (the reference's
// two layers): the top output, the bottom dx and every gradient, added over two passes, with
// and without per-sample lengths. A wrong pseudo-layer in the weight packing (layer 1's blocks
// into layer 0's slots) moves everything by O(1).
TEST_P(CudaRnnLayers, WholeStackAgreesWithTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const Stack s = GetParam();
  const std::vector<int64_t> lengths = {4, 1, 7, 6, 2};
  for (const char* plan : {"whole", "layers"})
  for (const bool with_lengths : {false, true}) {
    SCOPED_TRACE(::testing::Message() << plan << (with_lengths ? " lengths" : " full length"));
    const std::span<const int64_t> l = with_lengths ? std::span<const int64_t>(lengths) : std::span<const int64_t>();
    const Inputs in = random_inputs(s, 16);
    const Results want = run_reference(s, in, l);
    const Results got = run_cuda_stack(gpu, s, in, 2, {}, l, plan);
    EXPECT_LT(scaled_error(got.y[1], want.y[1]), kTol);
    EXPECT_LT(scaled_error(got.dx[0], want.dx[0]), kTol);
    for (int k = 0; k < 2; ++k) EXPECT_LT(scaled_error(got.grads[k], times(want.grads[k], 2.f)), kTol) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(CudaRnn, CudaRnnLayers,
                         ::testing::Values(Stack{RnnCell::lstm, 1}, Stack{RnnCell::lstm, 2}, Stack{RnnCell::gru, 1},
                                           Stack{RnnCell::gru, 2}),
                         [](const ::testing::TestParamInfo<Stack>& i) {
                           return std::string(i.param.cell == RnnCell::lstm ? "lstm" : "gru") +
                                  (i.param.dirs == 2 ? "_bidirectional" : "_unidirectional");
                         });

// The inference forward (no reserve space kept) computes what the training forward does. cuDNN
// may pick other kernels for it, so the bar is fp32 rounding (1e-5), not bit equality; backward
// after it is an Error (nothing was kept).
TEST(CudaRnn, InferenceForwardEqualsTrainingForward) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (const Stack s : {Stack{RnnCell::lstm, 2}, Stack{RnnCell::gru, 2}}) {
    SCOPED_TRACE(s.cell == RnnCell::lstm ? "lstm" : "gru");
    const Inputs in = random_inputs(s, 13);
    auto layers = gpu.make_recurrent(s.spec());
    const Shape y_shape{T, N, H * s.dirs};
    DeviceArray<float> x(gpu, in.x), p0(gpu, in.params[0]), g0(gpu, std::vector<float>(s.params(0), 0.f));
    DeviceArray<float> y_train(gpu, s.y_size()), y_infer(gpu, s.y_size()), dy(gpu, in.dy);
    const RecurrentWeights w0 = s.weights(0, p0.get(), g0.get());
    Arena arena;
    layers->forward(0, w0, Tensor(x.get(), {T, N, C}), Tensor(y_train.get(), y_shape), arena, true, {});
    layers->forward(0, w0, Tensor(x.get(), {T, N, C}), Tensor(y_infer.get(), y_shape), arena, false, {});
    EXPECT_LT(scaled_error(y_infer.download(), y_train.download()), 1e-5);
    EXPECT_CONTAINS(error_of([&] { layers->backward(0, w0, Tensor(dy.get(), y_shape), arena, true); }),
                    "needs a training forward");
  }
}

// bf16 / fp16 (runtime.precision on the GPU, as torch.autocast's cuDNN LSTM): data, weights and
// hidden states in 16 bits with fp32 accumulation, so the results are the fp32 reference's to
// 16-bit rounding compounded over 7 steps and two layers: within 4e-2 (bf16, 8 mantissa bits) and
// 1e-2 (fp16, 11) of each tensor's scale, and not equal to it (above 1e-5: the 16-bit path ran,
// not the fp32 one). A wrong gate order or a widening bug moves them by O(1).
TEST(CudaRnn, HalfPrecisionLayersAgreeWithTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  EXPECT_TRUE(gpu.supports(BackendOp::rnn_bf16));
  EXPECT_TRUE(gpu.supports(BackendOp::rnn_fp16));
  for (const DType dt : {DType::bf16, DType::f16})
    for (const Stack s : {Stack{RnnCell::lstm, 1}, Stack{RnnCell::lstm, 2}, Stack{RnnCell::gru, 2}}) {
      SCOPED_TRACE(::testing::Message() << (dt == DType::bf16 ? "bf16 " : "fp16 ")
                                        << (s.cell == RnnCell::lstm ? "lstm" : "gru") << " dirs " << s.dirs);
      const double tol = dt == DType::bf16 ? 4e-2 : 1e-2;
      const Inputs in = random_inputs(s, 14);
      const Results want = run_reference(s, in);
      const Precision precision{.compute = dt, .loss_scaling = dt == DType::f16};
      const Results got = run_cuda(gpu, s, in, 1, precision);
      for (int k = 0; k < 2; ++k) {
        SCOPED_TRACE(::testing::Message() << "layer " << k);
        EXPECT_LT(scaled_error(got.y[k], want.y[k]), tol);
        EXPECT_GT(scaled_error(got.y[k], want.y[k]), 1e-5);
        EXPECT_LT(scaled_error(got.dx[k], want.dx[k]), tol);
        EXPECT_LT(scaled_error(got.grads[k], want.grads[k]), tol);
      }
      // The stack in 16 bits as one cuDNN call: the same bar.
      const Results stack = run_cuda_stack(gpu, s, in, 1, precision);
      EXPECT_LT(scaled_error(stack.y[1], want.y[1]), tol);
      EXPECT_GT(scaled_error(stack.y[1], want.y[1]), 1e-5);
      EXPECT_LT(scaled_error(stack.dx[0], want.dx[0]), tol);
      for (int k = 0; k < 2; ++k) EXPECT_LT(scaled_error(stack.grads[k], want.grads[k]), tol) << k;
    }
}

// runtime.autotune: the first training forward of a stack times cuDNN's algorithms, each as
// one call of the whole stack and as a call per layer, through the run's Autotuner and keeps its
// choice. A timer that favours the whole stack on the persistent kernels makes it choose that
// (one decision, keyed by the cuDNN shape); the results still agree with the reference, and the
// next step times nothing.
TEST(CudaRnn, AutotuneChoosesTheFasterAlgorithmAndKeepsIt) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const Stack s{RnnCell::lstm, 1};
  int timed = 0;
  auto tuner = std::make_shared<Autotuner>([&](const std::string&, const TuneCandidate& c) {
    ++timed;
    c.run();
    return c.name == "whole persist_static" ? 1.0 : 2.0;
  });
  const Inputs in = random_inputs(s, 17);
  RecurrentSpec spec = s.spec();
  spec.options.autotune = true;
  spec.options.autotuner = tuner;
  auto layers = gpu.make_recurrent(spec);
  const Shape y_shape{T, N, H};
  DeviceArray<float> x(gpu, in.x), dy(gpu, in.dy), y(gpu, s.y_size());
  DeviceArray<float> p0(gpu, in.params[0]), p1(gpu, in.params[1]);
  DeviceArray<float> g0(gpu, std::vector<float>(s.params(0), 0.f)), g1(gpu, std::vector<float>(s.params(1), 0.f));
  const RecurrentWeights w[2] = {s.weights(0, p0.get(), g0.get()), s.weights(1, p1.get(), g1.get())};
  Arena arena(gpu);
  layers->forward_stack(w, Tensor(x.get(), {T, N, C}), Tensor(y.get(), y_shape), arena, true, {});
  ASSERT_EQ(tuner->decisions().size(), 1u);
  EXPECT_EQ(tuner->decisions()[0].choice, "whole persist_static");
  EXPECT_CONTAINS(tuner->decisions()[0].key, "cudnn lstm stack");
  const int timed_first = timed;
  EXPECT_GE(timed_first, 4);  // whole and layers, standard and persistent
  const Results want = run_reference(s, in);
  EXPECT_LT(scaled_error(y.download(), want.y[1]), kTol);
  const std::vector<float> dx = read_back(gpu, layers->backward_stack(w, Tensor(dy.get(), y_shape), arena, true));
  EXPECT_LT(scaled_error(dx, want.dx[0]), kTol);
  // The trials added nothing: the gradients are one backward's.
  EXPECT_LT(scaled_error(g1.download(), want.grads[1]), kTol);
  layers->forward_stack(w, Tensor(x.get(), {T, N, C}), Tensor(y.get(), y_shape), arena, true, {});
  EXPECT_EQ(timed, timed_first);
  EXPECT_EQ(tuner->decisions().size(), 1u);
}

TEST(CudaRnn, RefusesCheckpointingByName) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  EXPECT_TRUE(gpu.supports(BackendOp::rnn_fp32));
  EXPECT_FALSE(gpu.supports(BackendOp::rnn_grad_checkpoint));
  RecurrentSpec spec{RnnCell::lstm, 4, 1, {3}, {}};
  spec.options.grad_checkpoint = true;
  EXPECT_CONTAINS(error_of([&] { gpu.make_recurrent(spec); }), "train.grad_checkpoint");
  spec.options.grad_checkpoint = false;
  EXPECT_NO_THROW(gpu.make_recurrent(spec));
}

}  // namespace
}  // namespace seqtrain::testing
