// The CUDA backend's attention against the reference backend's naive loops, each test run on
// both of its implementations (cuda_attention.cpp): the cuBLASLt GEMM path and the
// FlashAttention tile kernels, chosen through SEQTRAIN_CUDA_ATTENTION (which the backend reads at
// every call). Causal and not, key-padding masks (lengths, random, sequences of padding only),
// attention dropout, odd head dimensions (D 12, 5, 36) up to 128, T not a multiple of the 32-row
// tiles (nor of the GEMM path's padding of 8) and T 1, the GPT shape (T 256, D 64, 48 heads);
// the documented empty rows (zeros, lse -inf, zero gradients) and padding keys (zero dk, dv);
// bf16 products; and bitwise determinism across runs. Every test skips without a usable GPU.
//
// Tolerances (as tests/test_attention.cpp argues for the CPU flash kernels, which sum in fp32
// the same way): fp32 within 1e-5 of each tensor's scale. With dropout the mask must be the
// reference's bit for bit (attention_dropout.h compiled for the device): one differing entry
// would move y by far more than 1e-5. bf16 within 2e-2 of the fp32 reference and visibly
// rounded (> 1e-4), and within 1e-2 of the CPU's bf16 kernels (the same rounding points; only
// fp32 summation order differs, which can flip an occasional bf16 rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"
#include "attention_cases.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

// Forward and backward on `be`, through its own memory; outputs start as NaN so an element the
// op forgets to write shows.
Result run_op(Backend& be, const MaskCase& c, const Inputs& in, DType compute = DType::f32, int64_t batch_offset = 0) {
  DeviceArray<float> qkv(be, in.qkv), dy(be, in.dy);
  DeviceArray<float> y(be, std::vector<float>(c.B * c.T * c.C, std::nanf("")));
  DeviceArray<float> lse(be, std::vector<float>(c.B * c.H * c.T, std::nanf("")));
  DeviceArray<float> dqkv(be, std::vector<float>(in.qkv.size(), std::nanf("")));
  DeviceArray<uint8_t> mask(be, in.mask);
  AttentionArgs a;
  a.batch = c.B;
  a.seq = c.T;
  a.heads = c.H;
  a.channels = c.C;
  a.compute = compute;
  a.dropout = c.p;
  a.seed = 42;
  a.batch_offset = batch_offset;
  a.causal = c.causal;
  a.key_padding_mask = c.pad == Pad::none ? nullptr : mask.get();
  a.qkv = qkv.get();
  a.y = y.get();
  a.lse = lse.get();
  be.attention_forward(a);
  be.attention_backward(a, dy.get(), dqkv.get());
  return {y.download(), lse.download(), dqkv.download()};
}

Backend& ref() { return backend_named("reference"); }
Backend& cpu() { return backend_named("cpu"); }

// The CUDA backend's two attention implementations, as SEQTRAIN_CUDA_ATTENTION names them.
const char* const kImpls[] = {"gemm", "tiles"};

// Runs the CUDA attention on implementation `impl` while alive, then restores the variable.
class UseAttention {
 public:
  explicit UseAttention(const char* impl) {
    if (const char* old = std::getenv(kVar)) old_ = old, had_ = true;
    setenv(kVar, impl, 1);
  }
  ~UseAttention() {
    if (had_)
      setenv(kVar, old_.c_str(), 1);
    else
      unsetenv(kVar);
  }
  UseAttention(const UseAttention&) = delete;
  UseAttention& operator=(const UseAttention&) = delete;

 private:
  static constexpr const char* kVar = "SEQTRAIN_CUDA_ATTENTION";
  std::string old_;
  bool had_ = false;
};

class CudaAttention : public ::testing::TestWithParam<std::tuple<MaskCase, const char*>> {
 protected:
  CudaAttention() : use_(std::get<1>(GetParam())) {}
  UseAttention use_;
};

TEST_P(CudaAttention, MatchesTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const MaskCase c = std::get<0>(GetParam());
  const Inputs in = inputs(c);
  expect_close(run_op(gpu, c, in), run_op(ref(), c, in), c, 1e-5);
}

// A data-parallel shard (AttentionArgs::batch_offset): the dropout masks are the global rows',
// the reference's, so MPI + CUDA attention dropout equals one process.
TEST_P(CudaAttention, BatchOffsetKeysTheGlobalRows) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const MaskCase c = std::get<0>(GetParam());
  if (c.p == 0.f) GTEST_SKIP() << "no dropout in this case";
  const Inputs in = inputs(c);
  expect_close(run_op(gpu, c, in, DType::f32, 5), run_op(ref(), c, in, DType::f32, 5), c, 1e-5);
}

// Padding keys get exactly zero dk and dv; a row that sees no key outputs zeros, lse -inf and
// passes no gradient to its q.
TEST_P(CudaAttention, PaddingKeysAndEmptyRowsGetExactZeros) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const MaskCase c = std::get<0>(GetParam());
  const Inputs in = inputs(c);
  const Result r = run_op(gpu, c, in);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.T; ++t) {
      const float* g = r.dqkv.data() + (b * c.T + t) * 3 * c.C;
      if (c.pad != Pad::none && in.mask[b * c.T + t]) {
        for (int64_t k = c.C; k < 3 * c.C; ++k) ASSERT_EQ(g[k], 0.f) << "dk/dv of padding key " << t;
      }
      bool sees_any = false;
      for (int64_t j = 0; j < (c.causal ? t + 1 : c.T); ++j) sees_any |= c.pad == Pad::none || !in.mask[b * c.T + j];
      if (sees_any) continue;
      for (int64_t k = 0; k < c.C; ++k) ASSERT_EQ(r.y[(b * c.T + t) * c.C + k], 0.f);
      for (int64_t k = 0; k < c.C; ++k) ASSERT_EQ(g[k], 0.f) << "dq of an empty row";
      for (int64_t h = 0; h < c.H; ++h) ASSERT_EQ(r.lse[(b * c.H + h) * c.T + t], -INFINITY);
    }
}

// No atomics anywhere: two runs give the same bits, fp32 and bf16.
TEST_P(CudaAttention, BitwiseDeterministic) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const MaskCase c = std::get<0>(GetParam());
  const Inputs in = inputs(c);
  for (DType dt : {DType::f32, DType::bf16}) {
    const Result one = run_op(gpu, c, in, dt), two = run_op(gpu, c, in, dt);
    EXPECT_EQ(0, std::memcmp(one.y.data(), two.y.data(), one.y.size() * 4));
    EXPECT_EQ(0, std::memcmp(one.lse.data(), two.lse.data(), one.lse.size() * 4));
    EXPECT_EQ(0, std::memcmp(one.dqkv.data(), two.dqkv.data(), one.dqkv.size() * 4));
  }
}

const MaskCase kCases[] = {
    MaskCase{2, 70, 36, 3, 0.f, true, Pad::none},         // D 12, 3 tiles
    MaskCase{2, 70, 36, 3, 0.f, false, Pad::none},
    MaskCase{2, 70, 36, 3, 0.f, true, Pad::random},       // causal row 0 empty
    MaskCase{3, 70, 36, 3, 0.f, false, Pad::lengths},     // a padding-only row
    MaskCase{2, 70, 36, 3, 0.2f, true, Pad::none},        // dropout
    MaskCase{3, 70, 36, 3, 0.3f, false, Pad::random},
    MaskCase{1, 1, 6, 2, 0.f, false, Pad::none},          // T 1
    MaskCase{2, 1, 4, 1, 0.f, true, Pad::lengths},        // T 1, all padding
    MaskCase{1, 37, 15, 3, 0.f, true, Pad::none},         // D 5
    MaskCase{2, 130, 128, 2, 0.1f, true, Pad::lengths},   // D 64, GPT's
    MaskCase{1, 45, 128, 1, 0.f, false, Pad::random},     // D 128, the limit
    MaskCase{1, 67, 36, 1, 1.f, false, Pad::none},        // p = 1: all dropped
    MaskCase{2, 64, 96, 8, 0.f, true, Pad::random},       // whole tiles
    MaskCase{8, 256, 384, 6, 0.2f, true, Pad::none},      // GPT's T and D, 48 heads
};

INSTANTIATE_TEST_SUITE_P(Cuda, CudaAttention,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::ValuesIn(kImpls)),
                         [](const auto& info) {
                           return case_name(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

TEST(CudaAttentionBf16, WithinToleranceOfFp32AndOfTheCpuKernels) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (const MaskCase c : {MaskCase{2, 70, 36, 3, 0.f, false, Pad::random},
                           MaskCase{3, 130, 48, 3, 0.1f, true, Pad::lengths},
                           MaskCase{2, 256, 384, 6, 0.2f, true, Pad::none}}) {  // GPT's
    const Inputs in = inputs(c);
    const Result fp = run_op(ref(), c, in);
    const Result cpu_bf = run_op(cpu(), c, in, DType::bf16);
    for (const char* impl : kImpls) {
      UseAttention use(impl);
      const Result bf = run_op(gpu, c, in, DType::bf16);
      const double ey = rel_err(bf.y, fp.y), eg = rel_err(bf.dqkv, fp.dqkv);
      std::printf("cuda %s bf16 vs fp32 (%s): y %.2e, dqkv %.2e\n", impl, case_name(c).c_str(), ey, eg);
      expect_lse_close(bf.lse, fp.lse, 2e-2);
      EXPECT_LT(ey, 2e-2) << impl;
      EXPECT_LT(eg, 2e-2) << impl;
      EXPECT_GT(ey, 1e-4) << impl << ": bf16 ran as fp32";
      EXPECT_GT(eg, 1e-4) << impl << ": bf16 ran as fp32";
      EXPECT_LT(rel_err(bf.y, cpu_bf.y), 1e-2) << impl << " " << case_name(c);
      EXPECT_LT(rel_err(bf.dqkv, cpu_bf.dqkv), 1e-2) << impl << " " << case_name(c);
    }
  }
}

TEST(CudaAttentionArgs, RefusesAHeadDimensionAboveTheLimit) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const MaskCase c{1, 4, 130, 1, 0.f, true, Pad::none};
  const Inputs in = inputs(c);
  for (const char* impl : kImpls) {
    UseAttention use(impl);
    EXPECT_CONTAINS(error_of([&] { run_op(gpu, c, in); }), "head dimension 130") << impl;
  }
}

// An unknown SEQTRAIN_CUDA_ATTENTION is an error naming the choices, not a silent default.
TEST(CudaAttentionArgs, RefusesAnUnknownImplementation) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const MaskCase c{1, 4, 8, 1, 0.f, true, Pad::none};
  const Inputs in = inputs(c);
  UseAttention use("flash");
  EXPECT_CONTAINS(error_of([&] { run_op(gpu, c, in); }), "SEQTRAIN_CUDA_ATTENTION is 'flash'");
}

}  // namespace
}  // namespace seqtrain::testing
