// RecurrentGemm over a oneDNN matmul with pre-packed weights: see recurrent_gemm.h.
#include "backend/cpu/recurrent_gemm.h"

#include <atomic>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "backend/cpu/dnnl_context.h"
#include "core/error.h"

namespace seqtrain {

using dnnl::memory;

struct RecurrentGemm::Entry {
  dnnl::matmul prim;
  dnnl::reorder pack;      // W_hh as stored -> the primitive's weights layout
  memory w_src, w_packed, a, c, scratch, pack_scratch;
  std::unordered_map<int, memory> args, pack_args;
  std::string impl;
};

namespace {
std::atomic<size_t> g_created{0};
}

RecurrentGemm::RecurrentGemm() = default;
RecurrentGemm::~RecurrentGemm() = default;
RecurrentGemm::RecurrentGemm(RecurrentGemm&&) noexcept = default;
RecurrentGemm& RecurrentGemm::operator=(RecurrentGemm&&) noexcept = default;

void RecurrentGemm::prepare(const Shape& s, const float* w_hh) {
  const bool fwd = s.op == Op::forward;
  // K is the reduced dimension, N the output columns.
  const int64_t K = fwd ? s.H : s.G, N = fwd ? s.G : s.H;
  ST_CHECK(s.M > 0 && s.G > 0 && s.H > 0 && s.lda >= K && s.ldc >= N,
           "RecurrentGemm: bad shape M={} G={} H={} lda={} ldc={}", s.M, s.G, s.H, s.lda, s.ldc);
  auto it = entries_.find(s);
  if (it == entries_.end()) {
    auto e = std::make_unique<Entry>();
    const auto f32 = memory::data_type::f32, in_dt = s.bf16 ? memory::data_type::bf16 : f32;
    dnnl::engine& eng = cpu_engine();
    memory::desc a_md({s.M, K}, in_dt, memory::dims{s.lda, 1});
    memory::desc c_md({s.M, N}, f32, memory::dims{s.ldc, 1});
    memory::desc w_any({K, N}, in_dt, memory::format_tag::any);
    // W_hh [G, H] row-major is the [K, N] weights itself in backward and, read with swapped
    // strides, its transpose in forward.
    memory::desc w_plain({K, N}, f32, fwd ? memory::dims{1, s.H} : memory::dims{s.H, 1});
    const dnnl::primitive_attr attr = matmul_attr(s.accumulate);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_any, c_md), attr, eng);
    e->impl = pd.impl_info_str();
    e->prim = dnnl::matmul(pd);
    e->w_src = memory(w_plain, eng, DNNL_MEMORY_NONE);
    e->w_packed = memory(pd.weights_desc(), eng);
    dnnl::primitive_attr pack_attr;
    pack_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::reorder::primitive_desc pack_pd(eng, w_plain, eng, pd.weights_desc(), pack_attr);
    e->pack = dnnl::reorder(pack_pd);
    e->pack_scratch = memory(pack_pd.scratchpad_desc(), eng);
    e->pack_args = {{DNNL_ARG_FROM, e->w_src}, {DNNL_ARG_TO, e->w_packed}, {DNNL_ARG_SCRATCHPAD, e->pack_scratch}};
    e->a = memory(a_md, eng, DNNL_MEMORY_NONE);
    e->c = memory(c_md, eng, DNNL_MEMORY_NONE);
    e->scratch = memory(pd.scratchpad_desc(), eng);
    e->args = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->w_packed}, {DNNL_ARG_DST, e->c},
               {DNNL_ARG_SCRATCHPAD, e->scratch}};
    ++g_created;
    it = entries_.emplace(s, std::move(e)).first;
  }
  cur_ = it->second.get();
  cur_->w_src.set_data_handle(const_cast<float*>(w_hh));
  cur_->pack.execute(cpu_stream(), cur_->pack_args);
  cpu_stream().wait();
}

void RecurrentGemm::run(const void* A, float* C) {
  ST_CHECK(cur_ != nullptr, "RecurrentGemm::run before prepare");
  cur_->a.set_data_handle(const_cast<void*>(A));
  cur_->c.set_data_handle(C);
  cur_->prim.execute(cpu_stream(), cur_->args);
  cpu_stream().wait();
}

std::string RecurrentGemm::impl() const { return cur_ ? cur_->impl : std::string("(not prepared)"); }

size_t RecurrentGemm::primitives_created() { return g_created.load(); }

}  // namespace seqtrain
