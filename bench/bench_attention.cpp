// bench_attention: the CPU backend's causal self-attention (backend/cpu/kernels/attention.cpp),
// forward and backward, at the nanoGPT CPU recipe's shape (B 12, T 64, C 128, H 4) and at a
// larger one (B 64, T 256, C 384, H 6), fp32 and bf16, without and with attention dropout.
//
//   bench_attention [--repeats R] [--threads P] [--noncausal 1] [--peak-gflops G] [--seq T]
//                   [--precision fp32|bf16] [--dropout P] [--clock wall|cpu]
//
// --seq, --precision, --dropout keep only the cases with that T, precision, dropout.
// --clock cpu times with the process's CPU clock (all threads summed) instead of the wall clock:
// with --threads 1 it compares two kernels on a machine others are busy on (the wall clock
// counts the time the scheduler gave to them; the CPU clock does not), as the GFLOP/s of one core.
//
// --noncausal 1: the encoder's mask (AttentionArgs::causal = false, every key tile visited).
// Printed per case: best and median wall ms of forward, of backward, of both, and GFLOP/s of
// both at the best time. FLOPs count the causal half only (T (T + 1) / 2 score entries per
// head; all T^2 when non-causal): forward 2 products (q k^T, p v), backward 5 (recomputed q k^T, dy v^T, p^T dy,
// dS^T q, dS k), each 2 D flops per entry; the recompute is counted, softmax and exp are not.
// With --peak-gflops G (the f32 matmul peak bench_step --workload peak measures; bench/gpt.sh
// passes it) each line also gives that GFLOP/s as a share of G.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "core/rng.h"

using namespace seqtrain;

namespace {

bool g_cpu_clock = false;

double now_ms() {
  if (g_cpu_clock) return bench::process_cpu_ms();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Case {
  int64_t B, T, C, H;
};

void run_case(const Case& c, DType dt, float p, int repeats, bool causal, double peak) {
  Backend& be = backend_named("cpu");
  Rng rng(1);
  std::vector<float> qkv(c.B * c.T * 3 * c.C), dy(c.B * c.T * c.C), y(dy.size()), lse(c.B * c.H * c.T),
      dqkv(qkv.size());
  for (auto& v : qkv) v = rng.normal();
  for (auto& v : dy) v = rng.normal();
  AttentionArgs a;
  a.batch = c.B; a.seq = c.T; a.heads = c.H; a.channels = c.C;
  a.compute = dt;
  a.dropout = p;
  a.seed = 7;
  a.causal = causal;
  a.qkv = qkv.data(); a.y = y.data(); a.lse = lse.data();
  std::vector<double> fwd, bwd, both;
  for (int r = 0; r < repeats + 2; ++r) {  // two warm-up rounds
    const double t0 = now_ms();
    be.attention_forward(a);
    const double t1 = now_ms();
    be.attention_backward(a, dy.data(), dqkv.data());
    const double f = t1 - t0, b = now_ms() - t1;
    if (r < 2) continue;
    fwd.push_back(f); bwd.push_back(b); both.push_back(f + b);
  }
  for (auto* v : {&fwd, &bwd, &both}) std::sort(v->begin(), v->end());
  const double D = static_cast<double>(c.C / c.H);
  const double entries = static_cast<double>(c.B) * c.H * c.T * (causal ? (c.T + 1) / 2.0 : c.T);
  const double flops = entries * 2.0 * D * (2 + 5);
  std::printf("B%-3lld T%-4lld C%-4lld H%-2lld %-4s p=%.1f  fwd %7.3f (med %7.3f) ms  bwd %7.3f (med %7.3f) ms  "
              "fwd+bwd %7.3f (med %7.3f) ms  %6.1f GFLOP/s",
              static_cast<long long>(c.B), static_cast<long long>(c.T), static_cast<long long>(c.C),
              static_cast<long long>(c.H), dt == DType::bf16 ? "bf16" : "fp32", p, fwd[0], fwd[fwd.size() / 2], bwd[0],
              bwd[bwd.size() / 2], both[0], both[both.size() / 2], flops / (both[0] * 1e6));
  if (peak > 0) std::printf("  %5.1f%% of peak (%.1f); median %5.1f%%", 100.0 * flops / (both[0] * 1e6) / peak, peak,
                            100.0 * flops / (both[both.size() / 2] * 1e6) / peak);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 20;
  bool causal = true;
  double peak = 0;
  int64_t only_seq = 0;
  std::string only_precision;
  float only_dropout = -1.f;
  int threads = 0;
  std::string clock = "wall";
  CLI::App app{"bench_attention: the attention kernels against their unfused equivalent"};
  app.add_option("--repeats", repeats)->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "0: OpenMP's default")->check(CLI::NonNegativeNumber);
  int noncausal = 0;
  app.add_option("--noncausal", noncausal, "1: no causal mask");
  app.add_option("--peak-gflops", peak, "0: measure");
  app.add_option("--seq", only_seq, "only this sequence length");
  app.add_option("--precision", only_precision, "only this precision")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--dropout", only_dropout, "only this dropout");
  app.add_option("--clock", clock)->check(CLI::IsMember({"wall", "cpu"}));
  bench::parse_flags(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  causal = noncausal == 0;
  g_cpu_clock = clock == "cpu";
  std::printf("threads %d, repeats %d, %s, %s clock\n", omp_get_max_threads(), repeats,
              causal ? "causal" : "non-causal", g_cpu_clock ? "cpu" : "wall");
  for (const Case& c : {Case{12, 64, 128, 4}, Case{64, 256, 384, 6}})
    for (DType dt : {DType::f32, DType::bf16})
      for (float p : {0.f, 0.1f}) {
        if (only_seq && c.T != only_seq) continue;
        if (!only_precision.empty() && only_precision != (dt == DType::bf16 ? "bf16" : "fp32")) continue;
        if (only_dropout >= 0.f && p != only_dropout) continue;
        run_case(c, dt, p, repeats, causal, peak);
      }
  return 0;
}
