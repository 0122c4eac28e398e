// bf16 GEMM over a cached oneDNN matmul: see gemm_bf16.h.
#include "backend/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/half_scalar.h"
#include "core/error.h"

namespace seqtrain {

// Follows the active level, so that a run capped by SEQTRAIN_ISA takes the lesser CPU's paths.
bool cpu_has_native_bf16() { return active_isa() >= Isa::avx512_bf16; }

float bf16_to_f32(uint16_t v) { return half_scalar::from_bf16(v); }

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) { cpu_kernels().bf16_to_f32(src, dst, n); }

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) { cpu_kernels().f32_to_bf16(src, dst, n); }

namespace {

using dnnl::memory;

struct MatmulKey {
  bool ta, tb, acc, bias;
  int64_t M, N, K, lda, ldb, ldc;
  auto tie() const { return std::tie(ta, tb, acc, bias, M, N, K, lda, ldb, ldc); }
  bool operator<(const MatmulKey& o) const { return tie() < o.tie(); }
};

struct Matmul {
  dnnl::matmul prim;
  memory a, b, c, bias, scratch;
  std::unordered_map<int, memory> args;
  std::string impl;
};

std::mutex g_mu;
std::map<MatmulKey, std::unique_ptr<Matmul>>& cache() {
  static std::map<MatmulKey, std::unique_ptr<Matmul>> c;
  return c;
}
size_t g_created = 0;

// Row-major [rows, cols] stored with row stride ld, or its transpose when t.
memory::desc md(int64_t rows, int64_t cols, int64_t ld, bool t, memory::data_type dt) {
  return memory::desc({rows, cols}, dt, t ? memory::dims{1, ld} : memory::dims{ld, 1});
}

Matmul& get(const MatmulKey& k) {
  auto& c = cache();
  auto it = c.find(k);
  if (it != c.end()) return *it->second;
  auto m = std::make_unique<Matmul>();
  const auto bf = memory::data_type::bf16, f32 = memory::data_type::f32;
  memory::desc a_md = md(k.M, k.K, k.lda, k.ta, bf), b_md = md(k.K, k.N, k.ldb, k.tb, bf);
  memory::desc c_md = md(k.M, k.N, k.ldc, false, f32);
  // The scratchpad (brgemm's packed copies of A and B) is allocated once here.
  const dnnl::primitive_attr attr = matmul_attr(k.acc);
  dnnl::engine& eng = cpu_engine();
  const memory::desc bias_md({1, k.N}, f32, memory::dims{k.N, 1});
  dnnl::matmul::primitive_desc pd(
      k.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
  m->impl = pd.impl_info_str();
  m->prim = dnnl::matmul(pd);
  m->a = memory(a_md, eng, DNNL_MEMORY_NONE);
  m->b = memory(b_md, eng, DNNL_MEMORY_NONE);
  m->c = memory(c_md, eng, DNNL_MEMORY_NONE);
  m->scratch = memory(pd.scratchpad_desc(), eng);
  m->args = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c}, {DNNL_ARG_SCRATCHPAD, m->scratch}};
  if (k.bias) {
    m->bias = memory(bias_md, eng, DNNL_MEMORY_NONE);
    m->args[DNNL_ARG_BIAS] = m->bias;
  }
  ++g_created;
  return *c.emplace(k, std::move(m)).first->second;
}

}  // namespace

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc, const float* bias) {
  if (!gemm_has_work("gemm_bf16", ta, tb, M, N, K, lda, ldb, accumulate ? 1.f : 0.f, C, ldc)) return;
  std::lock_guard<std::mutex> lock(g_mu);
  Matmul& m = get(MatmulKey{ta, tb, accumulate, bias != nullptr, M, N, K, lda, ldb, ldc});
  m.a.set_data_handle(const_cast<uint16_t*>(A));
  if (bias != nullptr) m.bias.set_data_handle(const_cast<float*>(bias));
  m.b.set_data_handle(const_cast<uint16_t*>(B));
  m.c.set_data_handle(C);
  m.prim.execute(cpu_stream(), m.args);
  cpu_stream().wait();
}

size_t gemm_bf16_primitives_created() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_created;
}

std::string gemm_bf16_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  std::lock_guard<std::mutex> lock(g_mu);
  return get(MatmulKey{ta, tb, false, false, M, N, K, lda, ldb, ldc}).impl;
}

}  // namespace seqtrain
