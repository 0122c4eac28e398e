// bench_recurrent_gemm: the fused RNN forward's per-step recurrent GEMM in isolation.
//
//   bench_recurrent_gemm [--n N] [--h H] [--gates G] [--steps T] [--repeats R] [--threads P]
//
// Times T back-to-back calls of gates[N, G*H] += h[N, H] x W_hh^T (W_hh [G*H, H], PyTorch's
// layout) the ways the engine could run them, each variant in turn R times in one process (A/B
// on a shared machine is only fair back to back), and prints the best and median ms per T calls:
//   sgemm_nt     dnnl_sgemm('N','T') on W_hh as stored: what rnn_fused.cpp did before
//   sgemm_nn     dnnl_sgemm('N','N') on a W_hh^T copied once
//   matmul_any   a dnnl::matmul created once, weights in the layout it prefers (format_tag::any),
//                reordered once, sum post-op: what backend/cpu/recurrent_gemm.cpp does
//   recurrent    seqtrain::RecurrentGemm itself (prepare once, T runs)
// and the same for backward's dh[N, H] = dgates[N, G*H] x W_hh (sgemm_bwd vs recurrent_bwd).
// Defaults are W2's shape: N 32, H 512, 4 gates, T 256.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/recurrent_gemm.h"

using namespace seqtrain;

int main(int argc, char** argv) {
  int64_t N = 32, H = 512, gates = 4, T = 256, R = 7, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (k == "--n") N = v;
    else if (k == "--h") H = v;
    else if (k == "--gates") gates = v;
    else if (k == "--steps") T = v;
    else if (k == "--repeats") R = v;
    else if (k == "--threads") threads = v;
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  const int nthr = set_cpu_threads(static_cast<int>(threads));
  const int64_t G = gates * H;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  std::vector<float> w(G * H), wt(H * G), h(T * N * H), out(T * N * G), dg(T * N * G), dh(N * H);
  for (auto* v : {&w, &h, &dg})
    for (float& x : *v) x = u(rng);
  for (int64_t r = 0; r < G; ++r)
    for (int64_t c = 0; c < H; ++c) wt[c * G + r] = w[r * H + c];

  // The primitive with weights in its preferred layout, as a reference built with the plain API.
  using dnnl::memory;
  dnnl::engine& eng = cpu_engine();
  memory::desc a_md({N, H}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc c_md({N, G}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b_any({H, G}, memory::data_type::f32, memory::format_tag::any);
  memory::desc b_plain({H, G}, memory::data_type::f32, memory::dims{1, H});  // W_hh^T view of W_hh
  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  po.append_sum(1.f);
  attr.set_post_ops(po);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, eng);
  memory wpk(pd.weights_desc(), eng);
  memory wsrc(b_plain, eng, w.data());
  dnnl::reorder(wsrc, wpk).execute(cpu_stream(), wsrc, wpk);
  cpu_stream().wait();
  dnnl::matmul mm(pd);
  memory am(a_md, eng, DNNL_MEMORY_NONE), cm(c_md, eng, DNNL_MEMORY_NONE);

  RecurrentGemm fwd, bwd;
  const RecurrentGemm::Shape fs{RecurrentGemm::Op::forward, false, true, N, G, H, H, G};
  const RecurrentGemm::Shape bs{RecurrentGemm::Op::backward, false, false, N, G, H, G, H};

  std::map<std::string, std::function<void()>> run;
  run["sgemm_nt"] = [&] {
    for (int64_t t = 0; t < T; ++t)
      dnnl_sgemm('N', 'T', N, G, H, 1.f, h.data() + t * N * H, H, w.data(), H, 1.f, out.data() + t * N * G, G);
  };
  run["sgemm_nn"] = [&] {
    for (int64_t t = 0; t < T; ++t)
      dnnl_sgemm('N', 'N', N, G, H, 1.f, h.data() + t * N * H, H, wt.data(), G, 1.f, out.data() + t * N * G, G);
  };
  run["matmul_any"] = [&] {
    for (int64_t t = 0; t < T; ++t) {
      am.set_data_handle(h.data() + t * N * H);
      cm.set_data_handle(out.data() + t * N * G);
      mm.execute(cpu_stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wpk}, {DNNL_ARG_DST, cm}});
    }
    cpu_stream().wait();
  };
  run["recurrent"] = [&] {
    // One prepare per forward, as the layer does it.
    fwd.prepare(fs, w.data());
    for (int64_t t = 0; t < T; ++t) fwd.run(h.data() + t * N * H, out.data() + t * N * G);
  };
  run["sgemm_bwd"] = [&] {
    for (int64_t t = 0; t < T; ++t)
      dnnl_sgemm('N', 'N', N, H, G, 1.f, dg.data() + t * N * G, G, w.data(), H, 0.f, dh.data(), H);
  };
  run["recurrent_bwd"] = [&] {
    bwd.prepare(bs, w.data());
    for (int64_t t = 0; t < T; ++t) bwd.run(dg.data() + t * N * G, dh.data());
  };

  std::map<std::string, std::vector<double>> ms;
  for (auto& [name, f] : run) f();  // warm-up: primitive creation, first-touch, buffers
  for (int64_t r = 0; r < R; ++r)
    for (auto& [name, f] : run) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      ms[name].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  const double gflop = 2.0 * T * N * G * H * 1e-9;
  std::printf("N=%ld H=%ld G=%ld T=%ld threads=%d repeats=%ld  (%s; weights prepared: %s)\n", N, H, G, T, nthr, R,
              pd.impl_info_str(), fwd.impl().c_str());
  for (auto& [name, v] : ms) {
    std::sort(v.begin(), v.end());
    std::printf("  %-14s best %8.2f ms  median %8.2f ms  (%6.1f GFLOP/s best)\n", name.c_str(), v.front(),
                v[v.size() / 2], gflop / (v.front() * 1e-3));
  }
  return 0;
}
