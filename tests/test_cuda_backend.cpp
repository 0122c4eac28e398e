// The CUDA backend's core operations (cuda_backend.cu, cuda_gemm.cu, cuda_elementwise.cu,
// cuda_optim.cu) held to the reference backend (plain loops, sums in double) on odd shapes: GEMMs
// with every transpose pair, strided leading dimensions and accumulation; the 16-bit GEMMs
// against the fp64 product of the operands as the reference's convert rounds them; convert bit
// for bit; bias, the optimizers over several steps with a mixed decay mask, the L2 norm with
// non-finite inputs, scale / fill / copy and every activation; the memory functions' errors.
// Every GPU test starts with SEQTRAIN_CUDA_OR_SKIP and skips, with the reason printed, where no
// GPU can be used; CudaPlugin.LoadsAndResolvesEverySymbol needs none and proves that the plugin
// loads (dlopen with RTLD_NOW resolves every symbol it uses from this executable).
//
// Tolerances (each test states its own):
//   fp32 GEMM: strict fp32 by default (TF32 off, as torch's matmul.allow_tf32 since 1.12), so
//     only the fp32 accumulation order differs from the fp64 oracle: every element within 2e-5
//     of |alpha| sum_k |a b| + |beta c| (K <= 64: K 2^-24 < 4e-6). TF32 (10 mantissa bits,
//     ~2e-3 of that scale) fails it, as does a wrong transpose, stride or beta.
//   bf16 / fp16 GEMM: the products of the rounded operands are exact in fp32, so only the fp32
//     accumulation differs from the fp64 oracle: 2e-5 of sum |a b| (K <= 64: K 2^-24 < 4e-6,
//     with room for a tensor core's truncating adder).
//   AdamW / SGD: the same float operations as the CPU's; the reference runs in double and rounds
//     once, so after 5 steps each buffer is within 1e-6 of its largest element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_plugin.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

Backend& ref() { return backend_named("reference"); }


uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// ---- the plugin, no GPU needed --------------------------------------------------------------

// Where the plugin was built (beside the test binary), it must load: an undefined symbol shows
// here as "could not be loaded: undefined symbol ...". On a machine without a GPU it then says
// why there is none; on one with a GPU it has no reason to give.
TEST(CudaPlugin, LoadsAndResolvesEverySymbol) {
  // Where backend/cuda_plugin.cpp looks: SEQTRAIN_CUDA_PLUGIN, else beside this executable.
  const char* env = std::getenv("SEQTRAIN_CUDA_PLUGIN");
  const std::filesystem::path plugin = env && *env ? std::filesystem::path(env)
                                                   : std::filesystem::read_symlink("/proc/self/exe").parent_path() /
                                                         "libseqtrain_cuda.so";
  if (!std::filesystem::exists(plugin)) GTEST_SKIP() << "this build has no CUDA plugin (" << plugin << ")";
  const CudaAvailability& a = cuda_availability();
  ASSERT_FALSE(a.plugin.empty()) << a.why_none;
  EXPECT_EQ(a.why_none.find("could not be loaded"), std::string::npos) << a.why_none;
  if (a.devices == 0) EXPECT_FALSE(a.why_none.empty());
  else EXPECT_TRUE(a.why_none.empty()) << a.why_none;
}

// ---- identity and memory --------------------------------------------------------------------------

TEST(CudaBackend, NameAndSupportedOperations) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  EXPECT_EQ(gpu.name(), "cuda:0");
  EXPECT_FALSE(gpu.host_accessible());
  for (BackendOp op : {BackendOp::gemm_f32, BackendOp::gemm_bf16, BackendOp::gemm_f16, BackendOp::bias,
                       BackendOp::rnn_fp32, BackendOp::rnn_bf16, BackendOp::rnn_fp16, BackendOp::adamw, BackendOp::sgd, BackendOp::norm, BackendOp::scale,
                       BackendOp::fill, BackendOp::copy, BackendOp::activation, BackendOp::attention_f32,
                       BackendOp::attention_bf16, BackendOp::cross_entropy, BackendOp::layer_norm,
                       BackendOp::embedding, BackendOp::dropout})
    EXPECT_TRUE(gpu.supports(op)) << backend_op_name(op);
  EXPECT_FALSE(gpu.supports(BackendOp::rnn_grad_checkpoint));
}

// Asking for more than the GPU holds is an Error with the sizes and the keys to change, and the
// backend goes on working (the failed cudaMalloc's error does not stick).
TEST(CudaBackend, OutOfMemorySaysHowMuchAndWhatToChange) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const std::string e = error_of([&] { gpu.allocate(size_t{1} << 44); });  // 16 TiB
  EXPECT_CONTAINS(e, "out of memory");
  EXPECT_CONTAINS(e, "16777216 MiB more were asked for");
  EXPECT_CONTAINS(e, "train.batch_size");
  EXPECT_CONTAINS(e, "runtime.device: cpu");
  DeviceArray<float> ok(gpu, std::vector<float>{1.f, 2.f});
  EXPECT_EQ(ok.download(), (std::vector<float>{1.f, 2.f}));
}

TEST(CudaBackend, MemoryRoundTripsAndRefusesForeignPointersAndOverruns) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  EXPECT_EQ(gpu.allocate(0), nullptr);
  gpu.release(nullptr);  // ignored

  std::vector<float> host(1001);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f - 7.f;
  void* p = gpu.allocate(host.size() * sizeof(float));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kDeviceAlignment, 0u);
  {
    std::vector<float> staged = host;
    gpu.copy_from_host(staged.data(), p, staged.size() * sizeof(float));
    std::fill(staged.begin(), staged.end(), -1.f);  // the contract: reusable at once
  }
  std::vector<float> back(host.size(), 0.f);
  gpu.copy_to_host(p, back.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, host);
  // A part of the buffer, from inside it.
  std::vector<float> part(10);
  gpu.copy_to_host(static_cast<float*>(p) + 500, part.data(), part.size() * sizeof(float));
  EXPECT_EQ(part[0], host[500]);

  // Past the end, from either side, and a pointer that is not this backend's.
  EXPECT_CONTAINS(error_of([&] { gpu.copy_to_host(p, back.data(), (host.size() + 1) * sizeof(float)); }),
                  "copy_to_host");
  EXPECT_CONTAINS(error_of([&] {
                    gpu.copy_from_host(host.data(), static_cast<float*>(p) + 1, host.size() * sizeof(float));
                  }),
                  "copy_from_host");
  EXPECT_THROW(gpu.copy_to_host(host.data(), back.data(), 4), Error);
  void* foreign = ref().allocate(64);
  EXPECT_CONTAINS(error_of([&] { gpu.release(foreign); }), "did not allocate");
  ref().release(foreign);
  EXPECT_THROW(ref().release(p), Error);  // a CUDA buffer given to another backend

  gpu.release(p);
  EXPECT_CONTAINS(error_of([&] { gpu.release(p); }), "did not allocate");  // a second release
}

// ---- GEMM ---------------------------------------------------------------------------------------

struct GemmCase {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad_a, pad_b, pad_c;  // extra row stride beyond the stored column count
  float alpha, beta;
};

const GemmCase kGemmCases[] = {
    {false, false, 37, 29, 53, 0, 0, 0, 1.f, 0.f},   {true, false, 37, 29, 53, 3, 0, 5, 1.f, 1.f},
    {false, true, 37, 29, 53, 0, 7, 0, 1.3f, 0.5f},  {true, true, 37, 29, 53, 2, 2, 3, -0.7f, 1.f},
    {false, false, 1, 1, 1, 0, 0, 0, 1.f, 0.f},      {false, true, 64, 64, 64, 1, 1, 1, 1.f, 1.f},
    {true, false, 5, 130, 17, 0, 3, 0, 2.f, -1.f},   {false, false, 129, 3, 7, 4, 0, 2, 1.f, 0.f},
};

struct GemmData {
  std::vector<float> a, b, c;
  int64_t lda, ldb, ldc;
};

GemmData gemm_data(const GemmCase& g, uint64_t seed) {
  Rng rng(seed);
  GemmData d;
  d.lda = (g.ta ? g.M : g.K) + g.pad_a;
  d.ldb = (g.tb ? g.K : g.N) + g.pad_b;
  d.ldc = g.N + g.pad_c;
  d.a = randn(rng, (g.ta ? g.K : g.M) * d.lda);
  d.b = randn(rng, (g.tb ? g.N : g.K) * d.ldb);
  d.c = randn(rng, g.M * d.ldc);
  return d;
}

// Per element of C: |alpha| sum_k |a b| + |beta c|, the scale the tolerances are fractions of.
std::vector<double> gemm_magnitude(const GemmCase& g, const GemmData& d) {
  std::vector<double> out(d.c.size(), 0.0);
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < g.K; ++k) {
        const double av = g.ta ? d.a[k * d.lda + i] : d.a[i * d.lda + k];
        const double bv = g.tb ? d.b[j * d.ldb + k] : d.b[k * d.ldb + j];
        s += std::fabs(av * bv);
      }
      // beta 0 does not read C (NaN in those cases), so it adds nothing to the scale either.
      out[i * d.ldc + j] = std::fabs(g.alpha) * s + (g.beta == 0.f ? 0.0 : std::fabs(g.beta * d.c[i * d.ldc + j]));
    }
  return out;
}

std::string describe(const GemmCase& g) {
  return "ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb) + " M=" + std::to_string(g.M) +
         " N=" + std::to_string(g.N) + " K=" + std::to_string(g.K) + " alpha=" + std::to_string(g.alpha) +
         " beta=" + std::to_string(g.beta);
}

// fp32 GEMM, 2e-5 of the magnitude (the header comment). beta 0 must not read C, so C
// starts as NaN there; the padding between rows must be left as it was.
TEST(CudaBackend, GemmF32MatchesTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (const GemmCase& g : kGemmCases) {
    GemmData d = gemm_data(g, 11 + g.M * 7 + g.K);
    if (g.beta == 0.f) std::fill(d.c.begin(), d.c.end(), std::numeric_limits<float>::quiet_NaN());
    std::vector<float> want = d.c;
    ref().gemm(DType::f32, g.ta, g.tb, g.M, g.N, g.K, g.alpha, d.a.data(), d.lda, d.b.data(), d.ldb, g.beta,
               want.data(), d.ldc);
    DeviceArray<float> a(gpu, d.a), b(gpu, d.b), c(gpu, d.c);
    gpu.gemm(DType::f32, g.ta, g.tb, g.M, g.N, g.K, g.alpha, a.get(), d.lda, b.get(), d.ldb, g.beta, c.get(), d.ldc);
    const std::vector<float> got = c.download();
    const std::vector<double> mag = gemm_magnitude(g, d);
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < d.ldc; ++j) {
        const int64_t at = i * d.ldc + j;
        if (j >= g.N) {  // padding: untouched
          ASSERT_EQ(bits(got[at]), bits(d.c[at])) << describe(g) << " padding at " << i << "," << j;
          continue;
        }
        ASSERT_TRUE(std::isfinite(got[at])) << describe(g) << " at " << i << "," << j;
        ASSERT_NEAR(got[at], want[at], 2e-5 * mag[at] + 1e-30) << describe(g) << " at " << i << "," << j;
      }
  }
}

// The same GEMM twice gives the same bits (the cached plan), and a second shape between them
// does not disturb the first's plan.
TEST(CudaBackend, GemmF32RepeatsBitForBitThroughItsPlanCache) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const GemmCase g = kGemmCases[2], h = kGemmCases[6];
  const GemmData d = gemm_data(g, 3), e = gemm_data(h, 4);
  DeviceArray<float> a(gpu, d.a), b(gpu, d.b), c(gpu, d.c), a2(gpu, e.a), b2(gpu, e.b), c2(gpu, e.c);
  auto run = [&] {
    c.upload(d.c);
    gpu.gemm(DType::f32, g.ta, g.tb, g.M, g.N, g.K, g.alpha, a.get(), d.lda, b.get(), d.ldb, g.beta, c.get(), d.ldc);
    return c.download();
  };
  const std::vector<float> first = run();
  gpu.gemm(DType::f32, h.ta, h.tb, h.M, h.N, h.K, h.alpha, a2.get(), e.lda, b2.get(), e.ldb, h.beta, c2.get(), e.ldc);
  const std::vector<float> second = run();
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(bits(first[i]), bits(second[i])) << i;
}

// Operands at an odd element offset inside their buffers (a column block of a wider matrix, an
// arena slice): cuBLASLt must get an algorithm that reads 4-byte aligned data.
TEST(CudaBackend, GemmF32OnUnalignedViews) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const GemmCase g{false, true, 33, 19, 41, 5, 5, 5, 1.f, 0.f};
  const GemmData d = gemm_data(g, 21);
  std::vector<float> want = d.c;
  ref().gemm(DType::f32, g.ta, g.tb, g.M, g.N, g.K, g.alpha, d.a.data() + 1, d.lda, d.b.data() + 3, d.ldb, g.beta,
             want.data() + 1, d.ldc);
  DeviceArray<float> a(gpu, d.a), b(gpu, d.b), c(gpu, d.c);
  gpu.gemm(DType::f32, g.ta, g.tb, g.M, g.N, g.K, g.alpha, a.get() + 1, d.lda, b.get() + 3, d.ldb, g.beta,
           c.get() + 1, d.ldc);
  const std::vector<float> got = c.download();
  EXPECT_EQ(bits(got[0]), bits(d.c[0]));  // before the view: untouched
  EXPECT_LT(scaled_err(got, want), 2e-5);
}

// M or N zero: nothing happens; K zero: C = beta C (0 for beta 0 even over NaN), as the CPU.
TEST(CudaBackend, GemmEmptyShapes) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> c0 = {1.f, 2.f, nan, 3.f, -4.f, nan};  // 2 rows of 2, ldc 3
  DeviceArray<float> a(gpu, std::vector<float>(4, 1.f)), b(gpu, std::vector<float>(4, 1.f)), c(gpu, c0);
  gpu.gemm(DType::f32, false, false, 0, 2, 2, 1.f, a.get(), 2, b.get(), 2, 0.f, c.get(), 3);
  gpu.gemm(DType::f32, false, false, 2, 0, 2, 1.f, a.get(), 2, b.get(), 2, 0.f, c.get(), 3);
  std::vector<float> got = c.download();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(bits(got[i]), bits(c0[i])) << i;
  gpu.gemm(DType::f32, false, false, 2, 2, 0, 1.f, a.get(), 1, b.get(), 2, 0.5f, c.get(), 3);
  got = c.download();
  EXPECT_EQ(got[0], 0.5f);
  EXPECT_EQ(got[1], 1.f);
  EXPECT_TRUE(std::isnan(got[2]));  // padding
  EXPECT_EQ(got[3], 1.5f);
  EXPECT_EQ(got[4], -2.f);
  gpu.gemm(DType::f32, false, false, 2, 2, 0, 1.f, a.get(), 1, b.get(), 2, 0.f, c.get(), 3);
  got = c.download();
  EXPECT_EQ(got[0], 0.f);
  EXPECT_EQ(got[4], 0.f);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_THROW(gpu.gemm(DType::f32, false, false, 2, 2, 2, 1.f, a.get(), 1, b.get(), 2, 0.f, c.get(), 3), Error);
  EXPECT_THROW(gpu.gemm(DType::f32, false, false, 2, 3, 2, 1.f, a.get(), 2, b.get(), 3, 0.f, c.get(), 2), Error);
  EXPECT_THROW(gpu.gemm(DType::f32, false, false, -1, 2, 2, 1.f, a.get(), 2, b.get(), 2, 0.f, c.get(), 3), Error);
}

// bf16 / fp16 operands: against the fp64 product of the operands as the reference's convert
// rounds them (2e-5 of sum |a b|: the header comment). alpha 1 and beta 0 / 1 only.
TEST(CudaBackend, Gemm16BitMatchesTheProductOfRoundedOperands) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (DType t : {DType::bf16, DType::f16}) {
    for (GemmCase g : kGemmCases) {
      g.alpha = 1.f;
      g.beta = g.beta == 0.f ? 0.f : 1.f;
      GemmData d = gemm_data(g, 5 + g.N);
      std::vector<uint16_t> a16(d.a.size()), b16(d.b.size());
      ref().convert(DType::f32, d.a.data(), t, a16.data(), d.a.size());
      ref().convert(DType::f32, d.b.data(), t, b16.data(), d.b.size());
      ref().convert(t, a16.data(), DType::f32, d.a.data(), d.a.size());  // the rounded operands
      ref().convert(t, b16.data(), DType::f32, d.b.data(), d.b.size());
      std::vector<float> want = d.c;
      ref().gemm(DType::f32, g.ta, g.tb, g.M, g.N, g.K, 1.f, d.a.data(), d.lda, d.b.data(), d.ldb, g.beta,
                 want.data(), d.ldc);
      DeviceArray<uint16_t> a(gpu, a16), b(gpu, b16);
      DeviceArray<float> c(gpu, d.c);
      gpu.gemm(t, g.ta, g.tb, g.M, g.N, g.K, 1.f, a.get(), d.lda, b.get(), d.ldb, g.beta, c.get(), d.ldc);
      const std::vector<float> got = c.download();
      const std::vector<double> mag = gemm_magnitude(g, d);
      for (int64_t i = 0; i < g.M; ++i)
        for (int64_t j = 0; j < g.N; ++j) {
          const int64_t at = i * d.ldc + j;
          ASSERT_NEAR(got[at], want[at], 2e-5 * mag[at] + 1e-30)
              << dtype_name(t) << " " << describe(g) << " at " << i << "," << j;
        }
      EXPECT_THROW(gpu.gemm(t, g.ta, g.tb, g.M, g.N, g.K, 2.f, a.get(), d.lda, b.get(), d.ldb, 0.f, c.get(), d.ldc),
                   Error);
      EXPECT_THROW(gpu.gemm(t, g.ta, g.tb, g.M, g.N, g.K, 1.f, a.get(), d.lda, b.get(), d.ldb, 0.5f, c.get(), d.ldc),
                   Error);
    }
  }
  DeviceArray<float> x(gpu, std::vector<float>(4, 1.f));
  EXPECT_THROW(gpu.gemm(DType::f64, false, false, 1, 1, 1, 1.f, x.get(), 1, x.get(), 1, 0.f, x.get(), 1), Error);
}

// ---- convert ------------------------------------------------------------------------------------

// Both directions, both formats, bit for bit with the reference: ties to even, NaN (payloads
// kept quiet), infinities, fp16 overflow to inf at 65520 and its subnormals, negative zero.
TEST(CudaBackend, ConvertMatchesTheReferenceBitForBit) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  Rng rng(9);
  std::vector<float> x = randn(rng, 4099, 3.f);
  const float specials[] = {0.f, -0.f, 1.f, -1.f, 65504.f, 65519.f, 65520.f, -70000.f, 1e-5f, 6e-8f, 2.9e-8f,
                            3e-8f, 1e-30f, 1.00390625f, 1.01171875f, 3.4e38f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
  uint32_t signalling = 0x7f800123u;  // a NaN with a payload
  std::memcpy(&x[std::size(specials)], &signalling, sizeof signalling);
  x[std::size(specials) + 1] = std::ldexp(1.f, -20) * 1.5f;  // subnormal halfway cases in fp16
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<uint16_t> want(x.size());
    ref().convert(DType::f32, x.data(), t, want.data(), x.size());
    DeviceArray<float> src(gpu, x);
    DeviceArray<uint16_t> dst(gpu, x.size());
    gpu.convert(DType::f32, src.get(), t, dst.get(), x.size());
    const std::vector<uint16_t> got = dst.download();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " of " << x[i] << " at " << i;

    // Every 16-bit pattern widened.
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> wide(all.size());
    ref().convert(t, all.data(), DType::f32, wide.data(), all.size());
    DeviceArray<uint16_t> hsrc(gpu, all);
    DeviceArray<float> fdst(gpu, all.size());
    gpu.convert(t, hsrc.get(), DType::f32, fdst.get(), all.size());
    const std::vector<float> back = fdst.download();
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(bits(back[i]), bits(wide[i])) << dtype_name(t) << " bits " << i;
  }
  DeviceArray<float> f(gpu, 4);
  EXPECT_THROW(gpu.convert(DType::f32, f.get(), DType::f64, f.get(), 4), Error);
  EXPECT_THROW(gpu.convert(DType::bf16, f.get(), DType::f16, f.get(), 4), Error);
}

// ---- bias -----------------------------------------------------------------------------------------

// bias_rows exactly; bias_grad accumulates onto db, in double as the reference, so only the
// order of the double sum differs (1e-12 of sum |dy|) and with it, rarely, a float rounding.
TEST(CudaBackend, BiasRowsAndBiasGradMatchTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const int64_t shapes[][2] = {{1, 1}, {37, 29}, {300, 65}, {1000, 3}, {3, 1000}, {2049, 33}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    Rng rng(static_cast<uint64_t>(rows * 1000 + cols));
    const std::vector<float> b = randn(rng, cols), dy = randn(rng, rows * cols), db0 = randn(rng, cols);
    DeviceArray<float> bd(gpu, b), y(gpu, rows * cols), dyd(gpu, dy), dbd(gpu, db0);
    gpu.bias_rows(bd.get(), y.get(), rows, cols);
    std::vector<float> want_y(rows * cols);
    ref().bias_rows(b.data(), want_y.data(), rows, cols);
    EXPECT_EQ(y.download(), want_y) << rows << "x" << cols;

    gpu.bias_grad(dyd.get(), dbd.get(), rows, cols);
    gpu.bias_grad(dyd.get(), dbd.get(), rows, cols);  // adds, twice
    std::vector<float> once = db0;
    ref().bias_grad(dy.data(), once.data(), rows, cols);
    std::vector<float> want = once;
    ref().bias_grad(dy.data(), want.data(), rows, cols);
    const std::vector<float> got = dbd.download();
    for (int64_t j = 0; j < cols; ++j) {
      double abs_sum = 0;
      for (int64_t i = 0; i < rows; ++i) abs_sum += std::fabs(dy[i * cols + j]);
      // One float rounding per call may differ (a near-tie of the double sums): 2^-23 of each
      // call's result.
      const double tol = 1.2e-7 * (std::fabs(once[j]) + std::fabs(want[j])) + 2e-12 * abs_sum;
      ASSERT_NEAR(got[j], want[j], tol) << rows << "x" << cols << " col " << j;
    }
  }
}

// ---- optimizers -----------------------------------------------------------------------------------

// A buffer of n with a decay mask of three runs (decay, none, decay), as a model's weights and
// biases give.
std::vector<DecayRange> mixed_runs(size_t n) {
  return {{0, n / 3, true}, {n / 3, n / 2, false}, {n / 2, n, true}};
}

TEST(CudaBackend, AdamWFiveStepsMatchTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (size_t n : {size_t{1}, size_t{1037}, size_t{70001}}) {
    Rng rng(n);
    std::vector<float> p = randn(rng, static_cast<int64_t>(n)), m(n, 0.f), v(n, 0.f);
    const std::vector<DecayRange> runs = n == 1 ? std::vector<DecayRange>{{0, 1, true}} : mixed_runs(n);
    DeviceArray<float> pd(gpu, p), md(gpu, m), vd(gpu, v), gd(gpu, n);
    for (int64_t step = 1; step <= 5; ++step) {
      const std::vector<float> g = randn(rng, static_cast<int64_t>(n), 0.1f);
      gd.upload(g);
      AdamWUpdate u;
      u.runs = &runs;
      u.lr = 1e-2;
      u.beta1 = 0.9;
      u.beta2 = 0.95;
      u.eps = 1e-8;
      u.weight_decay = 0.1;
      u.step = step;
      u.params = p.data(); u.grads = g.data(); u.m = m.data(); u.v = v.data();
      ref().adamw(u);
      u.params = pd.get(); u.grads = gd.get(); u.m = md.get(); u.v = vd.get();
      gpu.adamw(u);
    }
    EXPECT_LT(scaled_err(pd.download(), p), 1e-6) << n;
    EXPECT_LT(scaled_err(md.download(), m), 1e-6) << n;
    EXPECT_LT(scaled_err(vd.download(), v), 1e-6) << n;
  }
}

TEST(CudaBackend, SgdFiveStepsMatchTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  struct Variant { double momentum, dampening, weight_decay; bool nesterov; };
  const Variant variants[] = {{0, 0, 0, false}, {0, 0, 0.01, false}, {0.9, 0, 0.01, false}, {0.9, 0.1, 0, false},
                              {0.9, 0, 0.05, true}};
  const size_t n = 4099;
  const std::vector<DecayRange> runs = mixed_runs(n);
  for (const Variant& var : variants) {
    Rng rng(77);
    std::vector<float> p = randn(rng, n), buf(n, 0.f);
    DeviceArray<float> pd(gpu, p), bufd(gpu, buf), gd(gpu, n);
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> g = randn(rng, n, 0.1f);
      gd.upload(g);
      SgdUpdate u;
      u.runs = &runs;
      u.lr = 0.05;
      u.momentum = var.momentum;
      u.dampening = var.dampening;
      u.weight_decay = var.weight_decay;
      u.nesterov = var.nesterov;
      u.first = step == 0;
      u.params = p.data(); u.grads = g.data(); u.momentum_buffer = var.momentum != 0 ? buf.data() : nullptr;
      ref().sgd(u);
      u.params = pd.get(); u.grads = gd.get(); u.momentum_buffer = var.momentum != 0 ? bufd.get() : nullptr;
      gpu.sgd(u);
    }
    const std::string what = "momentum " + std::to_string(var.momentum) + " nesterov " + std::to_string(var.nesterov);
    EXPECT_LT(scaled_err(pd.download(), p), 1e-6) << what;
    if (var.momentum != 0) {
      EXPECT_LT(scaled_err(bufd.download(), buf), 1e-6) << what;
    }
  }
}

// ---- norm, scale, fill, copy ------------------------------------------------------------------------

// Both sum the squares in double; only the order differs (1e-12 relative), and a run repeats
// bit for bit. One NaN or Inf makes the norm NaN or Inf.
TEST(CudaBackend, L2NormMatchesTheReferenceAndPassesNonFiniteValues) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (size_t n : {size_t{1}, size_t{255}, size_t{1025}, size_t{1000003}}) {
    Rng rng(n + 3);
    std::vector<float> x = randn(rng, static_cast<int64_t>(n), 2.f);
    DeviceArray<float> xd(gpu, x);
    const double want = ref().l2_norm(x.data(), n), got = gpu.l2_norm(xd.get(), n);
    EXPECT_NEAR(got, want, 1e-12 * want) << n;
    EXPECT_EQ(gpu.l2_norm(xd.get(), n), got) << n;
    x[n / 2] = std::numeric_limits<float>::infinity();
    xd.upload(x);
    EXPECT_EQ(gpu.l2_norm(xd.get(), n), std::numeric_limits<double>::infinity()) << n;
    x[n - 1] = std::numeric_limits<float>::quiet_NaN();
    xd.upload(x);
    EXPECT_TRUE(std::isnan(gpu.l2_norm(xd.get(), n))) << n;
  }
  EXPECT_EQ(gpu.l2_norm(nullptr, 0), 0.0);
}

TEST(CudaBackend, ScaleFillAndCopy) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  Rng rng(5);
  const size_t n = 100003;
  std::vector<float> x = randn(rng, n);
  DeviceArray<float> xd(gpu, x), yd(gpu, n);
  gpu.scale(xd.get(), n, 0.37f);
  ref().scale(x.data(), n, 0.37f);
  EXPECT_EQ(xd.download(), x);
  gpu.copy(xd.get(), yd.get(), n);
  EXPECT_EQ(yd.download(), x);
  for (float v : {0.f, -0.f, 2.5f, std::numeric_limits<float>::infinity()}) {
    gpu.fill(yd.get(), n, v);
    const std::vector<float> got = yd.download();
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(bits(got[i]), bits(v)) << v << " at " << i;
    ASSERT_EQ(bits(got[n - 1]), bits(v));
  }
  gpu.fill(yd.get() + 1, 0, 1.f);  // nothing
  gpu.scale(yd.get(), 0, 1.f);
  gpu.copy(xd.get(), yd.get(), 0);
}

// ---- activations ------------------------------------------------------------------------------------

// CUDA's erff / tanhf / expf are within 2 ulp of the exact values, libm's float versions within
// 1, and FMA contraction moves a bit more: 4e-6 of (1 + |x|) (times (1 + |dy|) for backward)
// covers that, including GELU's 1 + erf cancellation for negative x; ReLU is exact.
TEST(CudaBackend, ActivationsMatchTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  Rng rng(31);
  const int64_t n = 5003;
  std::vector<float> x = randn(rng, n, 3.f), dy = randn(rng, n);
  const float specials[] = {0.f, -0.f, 1e-6f, -1e-6f, 9.f, -9.f, 20.f, -20.f, 90.f, -90.f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
  for (ActKind k : {ActKind::relu, ActKind::tanh, ActKind::sigmoid, ActKind::gelu, ActKind::gelu_tanh}) {
    const auto kind = static_cast<int>(k);
    std::vector<float> want_y(n), want_dx(n);
    ref().activation_forward(k, x.data(), want_y.data(), n);
    ref().activation_backward(k, x.data(), want_y.data(), dy.data(), want_dx.data(), n);
    DeviceArray<float> xd(gpu, x), yd(gpu, n), dyd(gpu, dy), dxd(gpu, n);
    gpu.activation_forward(k, xd.get(), yd.get(), n);
    yd.upload(want_y);  // backward from the reference's y, so only the backward formula is tested
    gpu.activation_backward(k, xd.get(), yd.get(), dyd.get(), dxd.get(), n);
    gpu.activation_forward(k, xd.get(), yd.get(), n);
    const std::vector<float> got_y = yd.download(), got_dx = dxd.download();
    for (int64_t i = 0; i < n; ++i) {
      const double tol = k == ActKind::relu ? 0.0 : 4e-6 * (1 + std::fabs(x[i]));
      ASSERT_NEAR(got_y[i], want_y[i], tol) << "kind " << kind << " x " << x[i];
      ASSERT_NEAR(got_dx[i], want_dx[i], tol * (1 + std::fabs(dy[i]))) << "kind " << kind << " x " << x[i];
    }
  }
}

}  // namespace
}  // namespace seqtrain::testing
