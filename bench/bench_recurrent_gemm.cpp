// bench_recurrent_gemm: the fused RNN kernels' per-step recurrent GEMM in isolation, and the
// fused layer with and without backend/cpu/recurrent_gemm.h.
//
//   bench_recurrent_gemm [--n N] [--h H] [--gates G] [--steps T] [--repeats R] [--threads P]
//                        [--c C] [--bf16 1]
//
// Each variant below runs in turn, R rounds, in one process (on a shared machine only A/B back
// to back is fair); printed: best and median wall ms, and best and median process CPU ms (with
// --threads 1 the CPU time leaves out time the thread was not scheduled: the steadier figure).
// Forward, T back-to-back calls of gh[N, G*H] = h[N, H] x W_hh^T (W_hh [G*H, H], PyTorch's layout):
//   sgemm_nt       dnnl_sgemm('N','T') on W_hh as stored: what rnn_fused.cpp did before
//   sgemm_nn       dnnl_sgemm('N','N') on a W_hh^T copied once
//   matmul_any     a dnnl::matmul created once, weights in the layout it prefers
//                  (format_tag::any), reordered once: what RecurrentGemm does
//   recurrent      seqtrain::RecurrentGemm itself (one prepare, T runs)
//   recurrent_acc  the same accumulating into the output (gh +=, a sum post-op), which is
//                  slower: the LSTM adds the projection in its gate pass instead
// Backward, T calls of dh[N, H] = dgates[N, G*H] x W_hh: sgemm_bwd vs recurrent_bwd.
// With --bf16 1 also both in RecurrentGemm's bf16 mode: recurrent_bf16, recurrent_bwd_bf16.
// Whole fused layer (backend/cpu/rnn_fused.h; LSTM for 4 gates, GRU for 3; input width C,
// default 512 = W2's second layer; --bf16 1: bf16 mode) with and without a RecurrentGemm:
// layer_fwd_sgemm / layer_fwd_rec and layer_bwd_sgemm / layer_bwd_rec.
// With --bf16 1 also the layer as the RNN stack runs it, saving the gates in fp32 or bf16:
// layer_fwd_g32 / layer_bwd_g32 and layer_fwd_g16 / layer_bwd_g16.
// Weight gradient dW_ih over all T*N rows in its two GEMM forms: wgrad_dgT_x / wgrad_xT_dg.
// Defaults are W2's shape: N 32, H 512, 4 gates, T 256.
#include <oneapi/dnnl/dnnl.h>

#include <time.h>

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

#include "bench_flags.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/recurrent_gemm.h"
#include "backend/cpu/rnn_fused.h"

using namespace seqtrain;

int main(int argc, char** argv) {
  int64_t N = 32, H = 512, gates = 4, T = 256, R = 7, threads = 0, C = 512, bf16 = 0;
  CLI::App app{"bench_recurrent_gemm: the recurrent step's GEMMs, ours against oneDNN's"};
  app.add_option("--n", N, "batch")->check(CLI::PositiveNumber);
  app.add_option("--h", H, "hidden")->check(CLI::PositiveNumber);
  app.add_option("--gates", gates)->check(CLI::PositiveNumber);
  app.add_option("--steps", T)->check(CLI::PositiveNumber);
  app.add_option("--repeats", R)->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "0: the machine's cores")->check(CLI::NonNegativeNumber);
  app.add_option("--c", C, "input channels")->check(CLI::PositiveNumber);
  app.add_option("--bf16", bf16, "1: the bf16 kernels");
  bench::parse_flags(app, argc, argv);
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
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  memory wpk(pd.weights_desc(), eng);
  memory wsrc(b_plain, eng, w.data());
  dnnl::reorder(wsrc, wpk).execute(cpu_stream(), wsrc, wpk);
  cpu_stream().wait();
  dnnl::matmul mm(pd);
  memory am(a_md, eng, DNNL_MEMORY_NONE), cm(c_md, eng, DNNL_MEMORY_NONE);

  RecurrentGemm fwd, fwd_acc, bwd;
  const RecurrentGemm::Shape fs{RecurrentGemm::Op::forward, false, false, N, G, H, H, G};
  const RecurrentGemm::Shape fs_acc{RecurrentGemm::Op::forward, false, true, N, G, H, H, G};
  const RecurrentGemm::Shape bs{RecurrentGemm::Op::backward, false, false, N, G, H, G, H};

  std::map<std::string, std::function<void()>> run;
  run["sgemm_nt"] = [&] {
    for (int64_t t = 0; t < T; ++t)
      dnnl_sgemm('N', 'T', N, G, H, 1.f, h.data() + t * N * H, H, w.data(), H, 0.f, out.data() + t * N * G, G);
  };
  run["sgemm_nn"] = [&] {
    for (int64_t t = 0; t < T; ++t)
      dnnl_sgemm('N', 'N', N, G, H, 1.f, h.data() + t * N * H, H, wt.data(), G, 0.f, out.data() + t * N * G, G);
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
  run["recurrent_acc"] = [&] {
    fwd_acc.prepare(fs_acc, w.data());
    for (int64_t t = 0; t < T; ++t) fwd_acc.run(h.data() + t * N * H, out.data() + t * N * G);
  };
  run["sgemm_bwd"] = [&] {
    for (int64_t t = 0; t < T; ++t)
      dnnl_sgemm('N', 'N', N, H, G, 1.f, dg.data() + t * N * G, G, w.data(), H, 0.f, dh.data(), H);
  };
  run["recurrent_bwd"] = [&] {
    bwd.prepare(bs, w.data());
    for (int64_t t = 0; t < T; ++t) bwd.run(dg.data() + t * N * G, dh.data());
  };
  // With --bf16 1, the same two through RecurrentGemm's bf16 mode (bf16 A, fp32 C).
  std::vector<uint16_t> h16(h.size()), dg16(dg.size());
  RecurrentGemm fwd16, bwd16;
  if (bf16) {
    f32_to_bf16(h.data(), h16.data(), h.size());
    f32_to_bf16(dg.data(), dg16.data(), dg.size());
    run["recurrent_bf16"] = [&] {
      fwd16.prepare({RecurrentGemm::Op::forward, true, false, N, G, H, H, G}, w.data());
      for (int64_t t = 0; t < T; ++t) fwd16.run(h16.data() + t * N * H, out.data() + t * N * G);
    };
    run["recurrent_bwd_bf16"] = [&] {
      bwd16.prepare({RecurrentGemm::Op::backward, true, false, N, G, H, G, H}, w.data());
      for (int64_t t = 0; t < T; ++t) bwd16.run(dg16.data() + t * N * G, dh.data());
    };
  }

  // The whole layer, fused kernels, with and without the packed recurrent GEMM.
  std::vector<float> wih(G * C), bih(G), bhh(G), x(T * N * C), lout(T * N * H), gts(T * N * G), extra(T * N * H),
      scratch(N * G), dout(T * N * H), dx(T * N * C), dwih(G * C), dwhh(G * H), dbih(G), dbhh(G), dgi(T * N * G),
      dgh(T * N * G), dhb(N * H), dcb(N * H);
  for (auto* v : {&wih, &bih, &bhh, &x, &dout})
    for (float& e : *v) e = u(rng);
  std::vector<uint16_t> wih_bf(wih.size()), whh_bf(w.size()), x_bf(x.size()), h_bf(T * N * H), dgi_bf(T * N * G),
      dgh_bf(T * N * G);
  f32_to_bf16(wih.data(), wih_bf.data(), wih.size());
  f32_to_bf16(w.data(), whh_bf.data(), w.size());
  f32_to_bf16(x.data(), x_bf.data(), x.size());
  FusedRnnArgs la;
  la.cell = gates == 4 ? RnnCell::lstm : RnnCell::gru;
  la.T = T; la.N = N; la.C = C; la.H = H;
  la.w_ih = wih.data(); la.w_hh = w.data(); la.b_ih = bih.data(); la.b_hh = bhh.data();
  la.x = x.data(); la.out = lout.data(); la.ld_out = H;
  la.gates = gts.data(); la.extra = extra.data(); la.scratch = scratch.data();
  if (bf16) {
    la.w_ih_bf = wih_bf.data(); la.w_hh_bf = whh_bf.data(); la.x_bf = x_bf.data(); la.h_bf = h_bf.data();
  }
  FusedRnnGrads lg;
  lg.dout = dout.data(); lg.dx = dx.data();
  lg.dw_ih = dwih.data(); lg.dw_hh = dwhh.data(); lg.db_ih = dbih.data(); lg.db_hh = dbhh.data();
  lg.dgi = dgi.data(); lg.dgh = gates == 4 ? dgi.data() : dgh.data(); lg.dh = dhb.data(); lg.dc = dcb.data();
  if (bf16) { lg.dgi_bf = dgi_bf.data(); lg.dgh_bf = dgh_bf.data(); }
  std::vector<float> partials(fused_rnn_bias_partials(N, la.cell, H));
  lg.bias_partials = partials.data();
  std::vector<float> wgrad_scratch(G * (C + H));
  lg.wgrad_scratch = wgrad_scratch.data();
  RecurrentGemm layer_fwd, layer_bwd;
  auto layer = [&](bool rec, bool backward) {
    FusedRnnArgs a = la;
    a.rec = rec ? &layer_fwd : nullptr;
    if (!backward) return fused_rnn_forward(a);
    FusedRnnGrads g = lg;
    g.rec = rec ? &layer_bwd : nullptr;
    fused_rnn_backward(a, g);
  };
  // The whole-sequence weight gradient dW_ih [G, C] over T*N rows, in the two GEMM forms
  // (rnn_fused.cpp's add_weight_grad): dg^T x straight into dW, or x^T dg into a [C, G] scratch
  // that is then added transposed (the transpose is in the timing). bf16 operands with --bf16 1.
  std::vector<float> wg_scratch(G * C);
  run["wgrad_dgT_x"] = [&] {
    if (bf16) gemm_bf16(true, false, G, C, T * N, dgi_bf.data(), G, x_bf.data(), C, true, dwih.data(), C);
    else dnnl_sgemm('T', 'N', G, C, T * N, 1.f, dg.data(), G, x.data(), C, 1.f, dwih.data(), C);
  };
  run["wgrad_xT_dg"] = [&] {
    if (bf16) gemm_bf16(true, false, C, G, T * N, x_bf.data(), C, dgi_bf.data(), G, false, wg_scratch.data(), G);
    else dnnl_sgemm('T', 'N', C, G, T * N, 1.f, x.data(), C, dg.data(), G, 0.f, wg_scratch.data(), G);
    for (int64_t r = 0; r < G; ++r)
      for (int64_t c = 0; c < C; ++c) dwih[r * C + c] += wg_scratch[c * G + r];
  };
  // The layer as the RNN stack runs it in bf16 mode (--bf16 1 only): the backward's GEMMs chunk
  // by chunk, and the activated gates saved either in fp32 (g32) or in bf16 (g16,
  // FusedRnnArgs::gates_half, with `gates` a working block of one chunk).
  const int64_t K = fused_rnn_backward_chunk(N, T);
  std::vector<uint16_t> gts16(T * N * G);
  auto staged = [&](bool half_gates, bool backward) {
    FusedRnnArgs a = la;
    a.rec = &layer_fwd;
    a.gate_slots = half_gates ? K : 0;
    a.gates_half = half_gates ? gts16.data() : nullptr;
    if (!backward) return fused_rnn_forward(a);
    FusedRnnGrads g = lg;
    g.rec = &layer_bwd;
    g.chunk = K;
    g.dg_step_only = true;
    fused_rnn_backward(a, g);
  };
  if (bf16) {
    run["layer_fwd_g32"] = [&] { staged(false, false); };
    run["layer_bwd_g32"] = [&] { staged(false, true); };
    run["layer_fwd_g16"] = [&] { staged(true, false); };
    run["layer_bwd_g16"] = [&] { staged(true, true); };
  }
  run["layer_fwd_sgemm"] = [&] { layer(false, false); };
  run["layer_fwd_rec"] = [&] { layer(true, false); };
  run["layer_bwd_sgemm"] = [&] { layer(false, true); };
  run["layer_bwd_rec"] = [&] { layer(true, true); };

  // Wall time, and the process's CPU time: with --threads 1 on a shared machine the CPU time
  // leaves out the time the thread was not scheduled, so it is the steadier A/B figure.
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  std::map<std::string, std::vector<double>> ms, cms;
  for (auto& [name, f] : run) f();  // warm-up: primitive creation, first-touch, buffers
  for (int64_t r = 0; r < R; ++r)
    for (auto& [name, f] : run) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_ms();
      f();
      cms[name].push_back(cpu_ms() - c0);
      ms[name].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  const double gflop = 2.0 * T * N * G * H * 1e-9;
  std::printf("N=%ld H=%ld G=%ld T=%ld C=%ld bf16=%ld threads=%d repeats=%ld  (%s; layer: %s)\n", N, H, G, T, C, bf16,
              nthr, R, pd.impl_info_str(), layer_fwd.impl().c_str());
  for (auto& [name, v] : ms) {
    auto& c = cms[name];
    std::sort(v.begin(), v.end());
    std::sort(c.begin(), c.end());
    std::printf("  %-16s wall best %8.2f median %8.2f ms | cpu best %8.2f median %8.2f ms\n", name.c_str(), v.front(),
                v[v.size() / 2], c.front(), c[c.size() / 2]);
  }
  std::printf("(one pass of T recurrent GEMMs is %.2f GFLOP)\n", gflop);
  return 0;
}
