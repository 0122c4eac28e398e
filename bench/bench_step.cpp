// bench_step: how fast seqtrain's full training step is, and where its time goes.
//
//   bench_step --workload W1|W2|W1GRU|peak [--threads N] [--steps S] [--warmup K] [--grad-checkpoint]
//              [--profile-steps P] [--peak-gflops G] [--rev REV] [--json OUT]
//              [--rnn-impl fused|onednn] [--precision fp32|bf16|auto]
//
// Workloads (forecaster, MSE loss, AdamW lr 1e-3, grad_clip 1.0, fixed-seed random data):
//   W1     batch 256, lookback 150, 8 features, LSTM hidden 128, 2 layers, 1 output
//   W1GRU  the same with a GRU
//   W2     batch 32, lookback 256, 128 features, LSTM hidden 512, 2 layers, 1 output
//   peak   only the f32 matmul peak below
//
// What is measured, in this order:
//  1. peak: the best GFLOP/s of 20 runs each of a 2048^3 f32 dnnl::matmul and of dnnl_sgemm with the same
//     thread count (in a forked child, so its 48 MB of matrices stay out of this process's
//     peak RSS). --peak-gflops G skips it and uses G (run.sh measures it once for all rows).
//     On a CPU with AVX512-BF16 it also reports bf16_gemm_gflops, the same shape through
//     gemm_bf16 (the mixed-precision kernels' GEMM): the ceiling of bf16's gain over f32.
//  2. step: seqtrain::TrainStep::run, the whole step, K warm-up steps then S timed ones;
//     ms/step is the median. Peak RSS (getrusage ru_maxrss) is read right after this phase.
// --rnn-impl and --precision set ModelSpec::rnn_impl and the precision policy (ModelEnv;
// defaults: fused kernels in fp32) for the step and the profile alike. --autotune on|off
// (default: on, as `seqtrain train`'s runtime.autotune, unless --rnn-impl names the kernels)
// times the candidate kernels per layer shape in the first warm-up step and keeps the fastest;
// the decisions go into the JSON ("autotune"), with the ISA level the kernels ran at ("isa").
//
// --grad-checkpoint sets ModelSpec::grad_checkpoint (RnnOptions::grad_checkpoint in the
// profile), as the config key train.grad_checkpoint does. Activation memory of the step
// (activation_mb): the TrainStep arena's high-water mark plus the RNN's checkpoint recompute
// arena (StepContext::scratch_bytes), after the timed steps. With --grad-checkpoint
// the same model without checkpointing then runs two steps for the "without" figure (after
// peak RSS is read, so that stays the checkpointed run's own).
//
//  3. profile: the same model rebuilt from its layers (RnnStack + Linear over a ParamStore,
//     as models/forecaster.cpp wires them) and stepped like train/step.cpp, with a clock
//     around each phase; "rnn" = RnnStack forward + backward, the RNN layers alone.
//  4. primitive: each layer's oneDNN RNN primitive run directly on pre-packed weights, as a
//     reference: with --rnn-impl onednn the difference to the RnnStack phases is nn/rnn.cpp's
//     packing, transposes and unpacking; with the fused kernels it compares the two kernels.
//
// FLOPs (multiply-add = 2): one layer and direction of the RNN forward is
// 2*T*N*G*H*(C+H) with G = 4 gates for LSTM, 3 for GRU, C its input width and H the hidden
// size (the input and recurrent GEMMs; gate nonlinearities are not counted). The head forward
// is 2*N*H*O. Backward counts 2x forward (input and weight gradients), so a step is
// 3 * (RNN forward + head forward). Loss, clipping and AdamW are memory-bound and not counted.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "bench_model.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "backend/autotune.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/rnn_primitive.h"
#include "core/arena.h"
#include "core/rng.h"
#include "models/forecaster.h"
#include "models/model.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/params.h"
#include "nn/rnn.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

using namespace seqtrain;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace seqtrain::bench;

namespace {

struct Args {
  std::string workload = "W1";
  int threads = 2;
  int steps = 10;
  int warmup = 2;
  int profile_steps = -1;  // -1: same as steps
  double peak_gflops = 0;  // 0: measure
  std::string rev = "unknown";
  std::string rnn_impl;   // empty: ModelSpec's default
  std::string autotune;   // "on" | "off"; empty: on unless rnn_impl is set
  std::string precision;  // empty: fp32
  std::string precision_word() const { return precision.empty() ? "fp32" : precision; }
  std::string json_out;
  bool grad_checkpoint = false;
};

struct Workload {
  std::string name;
  RnnCell cell;
  int64_t batch, lookback, features, hidden, layers, outputs;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_step: one training step of a recurrent workload, or the f32 matmul peak"};
  app.add_option("--workload", a.workload)->check(CLI::IsMember({"W1", "W2", "W1GRU", "peak"}));
  app.add_option("--threads", a.threads)->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup)->check(CLI::NonNegativeNumber);
  app.add_flag("--grad-checkpoint", a.grad_checkpoint);
  app.add_option("--profile-steps", a.profile_steps, "-1: --steps");
  app.add_option("--peak-gflops", a.peak_gflops, "0: measure");
  app.add_option("--rev", a.rev);
  app.add_option("--rnn-impl", a.rnn_impl)->check(CLI::IsMember({"fused", "onednn"}));
  app.add_option("--precision", a.precision, "fp32 (default), bf16, fp16 or auto");
  app.add_option("--autotune", a.autotune, "default: on unless --rnn-impl is given")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--json", a.json_out);
  bench::parse_flags(app, argc, argv);
  if (a.profile_steps < 0) a.profile_steps = a.steps;
  if (a.autotune.empty()) a.autotune = a.rnn_impl.empty() ? "on" : "off";
  return a;
}

Workload workload(const std::string& name) {
  if (name == "W1") return {name, RnnCell::lstm, 256, 150, 8, 128, 2, 1};
  if (name == "W1GRU") return {name, RnnCell::gru, 256, 150, 8, 128, 2, 1};
  if (name == "W2") return {name, RnnCell::lstm, 32, 256, 128, 512, 2, 1};
  throw std::invalid_argument("unknown workload " + name);  // --workload is checked when parsed
}

void fill(std::vector<float>& v, Rng& rng, float scale) {
  for (float& x : v) x = scale * rng.normal();
}

// ---- 1. f32 matmul peak -------------------------------------------------------------------

json measure_peak(int threads) {
  constexpr int64_t M = 2048, N = 2048, K = 2048;
  constexpr int kRuns = 20;
  set_cpu_threads(threads);
  std::vector<float> a(M * K), b(K * N), c(M * N);
  Rng rng(7);
  fill(a, rng, 1.f);
  fill(b, rng, 1.f);
  const double flops = 2.0 * M * N * K;

  using md = dnnl::memory::desc;
  auto& eng = cpu_engine();
  md a_md({M, K}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab), b_md({K, N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
      c_md({M, N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), eng));
  dnnl::memory am(a_md, eng, a.data()), bm(b_md, eng, b.data()), cm(c_md, eng, c.data());
  double best_mm = 1e30;
  for (int r = 0; r <= kRuns; ++r) {  // run 0 warms up
    auto t0 = Clock::now();
    mm.execute(cpu_stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    cpu_stream().wait();
    if (r) best_mm = std::min(best_mm, ms_since(t0));
  }
  double best_sgemm = 1e30;
  for (int r = 0; r <= kRuns; ++r) {
    auto t0 = Clock::now();
    dnnl_sgemm('N', 'N', M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
    if (r) best_sgemm = std::min(best_sgemm, ms_since(t0));
  }
  const double g_mm = flops / best_mm / 1e6, g_sg = flops / best_sgemm / 1e6;
  // The same shape through the bf16 GEMM the mixed-precision kernels use (gemm_bf16.h): the
  // ceiling of what bf16 can gain over f32 on this CPU. Not part of peak_gflops.
  json bf16 = nullptr;
  if (cpu_has_native_bf16()) {
    std::vector<uint16_t> ab(M * K), bb(K * N);
    f32_to_bf16(a.data(), ab.data(), M * K);
    f32_to_bf16(b.data(), bb.data(), K * N);
    double best_bf = 1e30;
    for (int r = 0; r <= kRuns; ++r) {
      auto t0 = Clock::now();
      gemm_bf16(false, false, M, N, K, ab.data(), K, bb.data(), N, false, c.data(), N);
      if (r) best_bf = std::min(best_bf, ms_since(t0));
    }
    bf16 = flops / best_bf / 1e6;
  }
  return {{"shape", "2048x2048x2048 f32"},
          {"threads", threads},
          {"matmul_ms", best_mm},
          {"matmul_gflops", g_mm},
          {"sgemm_ms", best_sgemm},
          {"sgemm_gflops", g_sg},
          {"bf16_gemm_gflops", bf16},
          {"peak_gflops", std::max(g_mm, g_sg)}};
}

// Runs measure_peak in a child process so that the parent's ru_maxrss never sees its matrices.
json measure_peak_forked(int threads) {
  int fds[2];
  if (pipe(fds) != 0) return measure_peak(threads);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string s = measure_peak(threads).dump();
    ssize_t w = write(fds[1], s.data(), s.size());
    (void)w;
    _exit(0);
  }
  close(fds[1]);
  std::string s;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) s.append(buf, n);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return json::parse(s);
}

// ---- FLOPs ---------------------------------------------------------------------------------

double rnn_forward_flops(const Workload& w) {
  const double G = rnn_gates(w.cell), T = w.lookback, N = w.batch, H = w.hidden;
  double f = 0;
  for (int64_t k = 0; k < w.layers; ++k) {
    const double C = k == 0 ? w.features : w.hidden;
    f += 2 * T * N * G * H * (C + H);
  }
  return f;
}

double head_forward_flops(const Workload& w) { return 2.0 * w.batch * w.hidden * w.outputs; }

// ---- 2. the full TrainStep -----------------------------------------------------------------

struct Data {
  std::vector<float> x, y;
  Tensor xt, yt;
};

Data make_data(const Workload& w) {
  Data d;
  d.x.resize(w.batch * w.lookback * w.features);
  d.y.resize(w.batch * w.outputs);
  Rng rng(1234);
  fill(d.x, rng, 1.f);
  fill(d.y, rng, 1.f);
  d.xt = Tensor(d.x.data(), {w.batch, w.lookback, w.features});
  d.yt = Tensor(d.y.data(), {w.batch, w.outputs});
  return d;
}

ModelSpec bench_spec(const Workload& w, const Args& a) {
  ModelSpec spec;
  spec.type = w.cell == RnnCell::lstm ? "lstm" : "gru";
  spec.input_size = w.features;
  spec.lookback = w.lookback;
  spec.hidden = w.hidden;
  spec.layers = w.layers;
  spec.output_size = w.outputs;
  if (!a.rnn_impl.empty()) spec.rnn_impl = a.rnn_impl;
  spec.grad_checkpoint = a.grad_checkpoint;
  spec.autotune = a.autotune == "on";
  return spec;
}

// Activation bytes of the same model and data with gradient checkpointing set to `ckpt`: two
// steps, the second on the sized arenas.
size_t activation_bytes_with(const Workload& w, Args a, const Data& d, bool ckpt) {
  a.grad_checkpoint = ckpt;
  bench::BenchModel b(bench_spec(w, a), resolve_precision(a.precision_word()));
  for (uint64_t i = 0; i < 2; ++i) b.step->run(d.xt, d.yt, i);
  return b.step->activation_bytes();
}

json bench_full_step(const Workload& w, const Args& a, const Data& d) {
  bench::BenchModel b(bench_spec(w, a), resolve_precision(a.precision_word()));
  Model* model = b.model.get();
  TrainStep& step = *b.step;

  const StepTimes t = time_steps(step, d.xt, d.yt, a.warmup, a.steps);
  const double loss = step.take_loss();
  json tuned = json::array();
  if (Autotuner* tuner = b.tuner.get())
    for (const auto& line : tuner->log_lines()) tuned.push_back(line);
  return {{"ms_median", median(t.ms)},
          {"autotune", tuned},
          {"involuntary_switches", t.switches},
          {"ms_min", *std::min_element(t.ms.begin(), t.ms.end())},
          {"ms_all", t.ms},
          {"first_step_ms", t.first_ms},
          {"mean_loss", loss},
          {"params", model->params().size()},
          {"arena_high_water_mb", step.arena().high_water() / 1048576.0},
          {"activation_mb", step.activation_bytes() / 1048576.0}};
}

// ---- 3. per-phase profile of the same step, rebuilt from its layers -------------------------

json bench_profile(const Workload& w, const Args& a, const Data& d) {
  ParamStore ps;
  const ModelSpec defaults;
  RnnOptions ro;
  ro.grad_checkpoint = a.grad_checkpoint;
  ro.autotune = a.autotune == "on";
  ro.impl = a.rnn_impl.empty() ? defaults.rnn_impl : a.rnn_impl;
  ro.precision = resolve_precision(a.precision_word());
  RnnStack rnn(ps, "rnn", w.cell, w.features, w.hidden, w.layers, false, 0.f, ro);
  Linear head(ps, "head", rnn.output_size(), w.outputs);
  ps.finalize();
  Rng rng(42);
  rnn.init(rng);
  head.init(rng);
  auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 1e-3});
  Arena arena;
  const char* names[] = {"rnn_forward", "head_forward", "loss", "head_backward", "dtop_fill",
                         "rnn_backward", "clip", "optimizer", "zero_grad"};
  constexpr int P = 9;
  std::map<std::string, std::vector<double>> t;
  std::vector<double> total;
  for (int i = 0; i < a.warmup + a.profile_steps; ++i) {
    double ph[P];
    arena.reset();
    auto t0 = Clock::now();
    Tensor top = rnn.forward(d.xt, arena, true, static_cast<uint64_t>(i));
    ph[0] = ms_since(t0);
    t0 = Clock::now();
    const int64_t T = top.shape[0];
    Tensor last = top.slice0(T - 1, T).reshape({top.shape[1], top.shape[2]});
    Tensor pred = head.forward(last, arena);
    ph[1] = ms_since(t0);
    t0 = Clock::now();
    loss_forward(LossKind::mse, pred, d.yt);
    Tensor dpred = arena.tensor(pred.shape);
    loss_backward(LossKind::mse, pred, d.yt, dpred);
    ph[2] = ms_since(t0);
    t0 = Clock::now();
    Tensor dlast = head.backward(dpred, arena);
    ph[3] = ms_since(t0);
    t0 = Clock::now();
    Tensor dtop = arena.zeros(top.shape);
    const int64_t block = top.shape[1] * top.shape[2];
    std::memcpy(dtop.f32() + (T - 1) * block, dlast.f32(), block * sizeof(float));
    ph[4] = ms_since(t0);
    t0 = Clock::now();
    rnn.backward(dtop, arena, false);
    ph[5] = ms_since(t0);
    t0 = Clock::now();
    clip_grad_norm(ps.grads(), ps.size(), 1.0);
    ph[6] = ms_since(t0);
    t0 = Clock::now();
    opt->step(ps.params(), ps.grads(), ps.size(), 1e-3);
    ph[7] = ms_since(t0);
    t0 = Clock::now();
    ps.zero_grad();
    ph[8] = ms_since(t0);
    if (i < a.warmup) continue;
    double sum = 0;
    for (int p = 0; p < P; ++p) {
      t[names[p]].push_back(ph[p]);
      sum += ph[p];
    }
    total.push_back(sum);
  }
  json phases = json::object();
  for (int p = 0; p < P; ++p) phases[names[p]] = median(t[names[p]]);
  std::vector<double> rnn_ms;
  for (size_t i = 0; i < total.size(); ++i) rnn_ms.push_back(t["rnn_forward"][i] + t["rnn_backward"][i]);
  return {{"phase_ms_median", phases}, {"sum_ms_median", median(total)}, {"rnn_ms_median", median(rnn_ms)}};
}

// ---- 4. the oneDNN primitives alone, weights already packed ---------------------------------

json bench_primitives(const Workload& w, const Args& a) {
  const int64_t G = rnn_gates(w.cell), Gb = w.cell == RnnCell::lstm ? G : rnn_bias_gates(w.cell);
  const int64_t T = w.lookback, N = w.batch, H = w.hidden;
  std::vector<double> fwd_total(a.profile_steps, 0.0), bwd_total(a.profile_steps, 0.0);
  json layers = json::array();
  Rng rng(5);
  for (int64_t k = 0; k < w.layers; ++k) {
    const int64_t C = k == 0 ? w.features : w.hidden;
    RnnPrimitive p(RnnShape{w.cell, T, N, C, H, 1, true});
    const float s = 1.f / std::sqrt(static_cast<float>(H));
    std::vector<float> src(T * N * C), dst(T * N * H), wl(C * G * H), wi(H * G * H), bias(Gb * H);
    std::vector<float> wl_t(wl.size()), wi_t(wi.size()), ddst(dst.size()), dsrc(src.size()), db(bias.size());
    std::vector<float> dwl(p.dw_layer_layout().bytes / sizeof(float)), dwi(p.dw_iter_layout().bytes / sizeof(float));
    fill(src, rng, 1.f);
    fill(wl, rng, s);
    fill(wi, rng, s);
    fill(bias, rng, s);
    fill(ddst, rng, 1e-3f);
    wl_t = wl;
    wi_t = wi;
    std::vector<float> ws((p.workspace_bytes() + sizeof(float) - 1) / sizeof(float));
    std::vector<double> f, b;
    for (int i = 0; i < a.warmup + a.profile_steps; ++i) {
      auto t0 = Clock::now();
      p.forward(src.data(), wl.data(), wi.data(), bias.data(), dst.data(), ws.data());
      const double tf = ms_since(t0);
      t0 = Clock::now();
      p.backward(src.data(), dst.data(), ddst.data(), dsrc.data(), wl_t.data(), wi_t.data(), bias.data(), dwl.data(),
                 dwi.data(), db.data(), ws.data());
      const double tb = ms_since(t0);
      if (i < a.warmup) continue;
      f.push_back(tf);
      b.push_back(tb);
      fwd_total[i - a.warmup] += tf;
      bwd_total[i - a.warmup] += tb;
    }
    layers.push_back({{"layer", k}, {"C", C}, {"forward_ms", median(f)}, {"backward_ms", median(b)},
                      {"forward_gflops", 2.0 * T * N * G * H * (C + H) / median(f) / 1e6},
                      {"backward_gflops", 4.0 * T * N * G * H * (C + H) / median(b) / 1e6}});
  }
  return {{"layers", layers}, {"forward_ms", median(fwd_total)}, {"backward_ms", median(bwd_total)}};
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  json out;
  out["engine"] = "seqtrain";
  out["version"] = a.rev;
  const dnnl_version_t* v = dnnl_version();
  out["onednn"] = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
                  (v->cpu_runtime == DNNL_RUNTIME_OMP ? " (OpenMP)" : "");
  out["workload"] = a.workload;
  out["threads"] = a.threads;
  {
    const ModelSpec defaults;
    out["rnn_impl"] = a.rnn_impl.empty() ? defaults.rnn_impl : a.rnn_impl;
    out["precision"] = a.precision_word();
  }
  out["grad_checkpoint"] = a.grad_checkpoint;
  out["autotune_on"] = a.autotune == "on";
  out["isa"] = isa_summary();
  out["load_before"] = loadavg();

  double peak = a.peak_gflops;
  if (peak <= 0) {
    json pk = a.workload == "peak" ? measure_peak(a.threads) : measure_peak_forked(a.threads);
    out["peak"] = pk;
    peak = pk["peak_gflops"].get<double>();
  }
  out["peak_gflops"] = peak;
  if (a.workload != "peak") {
    try {
      const Workload w = workload(a.workload);
      set_cpu_threads(a.threads);
      const Data d = make_data(w);
      const double rss_start = peak_rss_mb();
      json step = bench_full_step(w, a, d);
      const double rss_peak = peak_rss_mb();

      const double fwd = rnn_forward_flops(w), head = head_forward_flops(w);
      const double step_flops = 3 * (fwd + head), rnn_flops = 3 * fwd;
      const double ms = step["ms_median"].get<double>();
      out["shape"] = {{"cell", w.cell == RnnCell::lstm ? "lstm" : "gru"}, {"batch", w.batch},
                      {"lookback", w.lookback}, {"features", w.features}, {"hidden", w.hidden},
                      {"layers", w.layers}, {"outputs", w.outputs}};
      out["steps"] = a.steps;
      out["warmup"] = a.warmup;
      out["step"] = step;
      out["ms_per_step"] = ms;
      out["samples_per_s"] = w.batch / (ms / 1e3);
      out["flops_per_step"] = step_flops;
      out["gflops"] = step_flops / ms / 1e6;
      out["pct_peak"] = 100.0 * step_flops / ms / 1e6 / peak;
      out["rss_start_mb"] = rss_start;
      out["peak_rss_mb"] = rss_peak;
      const double act_mb = step["activation_mb"].get<double>();
      out["activation_mb"] = act_mb;
      if (a.grad_checkpoint) {
        const double without = activation_bytes_with(w, a, d, false) / 1048576.0;
        out["activation_mb_without_ckpt"] = without;
        out["activation_saved_pct"] = 100.0 * (1.0 - act_mb / without);
      }

      json prof = bench_profile(w, a, d);
      json prim = bench_primitives(w, a);
      const double rnn_ms = prof["rnn_ms_median"].get<double>();
      out["rnn"] = {{"ms", rnn_ms}, {"flops", rnn_flops}, {"gflops", rnn_flops / rnn_ms / 1e6},
                    {"pct_peak", 100.0 * rnn_flops / rnn_ms / 1e6 / peak}};
      const double pf = prim["forward_ms"].get<double>(), pb = prim["backward_ms"].get<double>();
      out["primitive"] = prim;
      out["primitive"]["gflops"] = rnn_flops / (pf + pb) / 1e6;
      out["primitive"]["pct_peak"] = 100.0 * rnn_flops / (pf + pb) / 1e6 / peak;
      out["profile"] = prof;
      const auto& ph = prof["phase_ms_median"];
      out["profile"]["rnn_forward_overhead_ms"] = ph["rnn_forward"].get<double>() - pf;
      out["profile"]["rnn_backward_overhead_ms"] = ph["rnn_backward"].get<double>() - pb;
    } catch (const std::exception& e) {
      std::cerr << "bench_step: " << e.what() << "\n";
      return 1;
    }
  }
  out["load_after"] = loadavg();
  const std::string s = out.dump(2);
  std::cout << s << "\n";
  if (out.contains("ms_per_step")) {  // one line for people; stdout stays pure JSON
    std::cerr << std::fixed << std::setprecision(1) << "bench_step: " << a.workload << " " << out["precision"].get<std::string>()
              << (a.grad_checkpoint ? " grad-checkpoint" : "") << ": " << out["ms_per_step"].get<double>()
              << " ms/step, activations " << out["activation_mb"].get<double>() << " MB";
    if (a.grad_checkpoint)
      std::cerr << " (without checkpointing " << out["activation_mb_without_ckpt"].get<double>() << " MB, "
                << out["activation_saved_pct"].get<double>() << "% saved)";
    std::cerr << ", peak RSS " << out["peak_rss_mb"].get<double>() << " MB\n";
  }
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    f << s << "\n";
    if (!f) {
      std::cerr << "bench_step: cannot write " << a.json_out << "\n";
      return 1;
    }
  }
  return 0;
}
