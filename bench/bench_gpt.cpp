// bench_gpt: how fast seqtrain's full training step of `model.type: gpt` is, and where its time goes.
//
//   bench_gpt --shape cpu|gpu [--batch B] [--precision fp32|bf16] [--threads N] [--steps S]
//             [--warmup K] [--profile-steps P] [--peak-gflops G] [--vocab V] [--rev REV] [--json OUT]
//             [--clock wall|cpu]
//
// Shapes (nanoGPT's shakespeare_char recipes; vocabulary 85 = <unk> + the 84 characters of
// data/shakespeare.txt, as examples/shakespeare_gpt.yaml builds it; bias on, dropout 0):
//   cpu   4 layers, 4 heads, n_embd 128, block 64,  batch 12
//   gpu   6 layers, 6 heads, n_embd 384, block 256, batch 64 (--batch lowers it on small CPUs)
// Step: seqtrain::TrainStep::run as the training loop runs it: forward, cross-entropy over every
// position, backward, global-norm clipping at 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), eps 1e-8,
// weight decay 0.1 on the 2-D tensors: train.optimizer.decay 2d, nanoGPT's groups), on fixed
// random token ids. K warm-up steps, then S timed ones; ms/step is the median.
// --precision bf16 is runtime.precision bf16 (the run's policy, backend/precision.h): every matrix
// product — the four Linears of each block, the attention op, the tied head — on bf16 operands with
// fp32 accumulation; weights, LayerNorm, GELU, softmax, the loss and AdamW stay fp32 (models/gpt.h).
//
// FLOPs per step (multiply-add = 2), nanoGPT's estimate_mfu convention with N counted exactly:
//   tokens * (6 * N_mm + 12 * L * T * C)
//   N_mm = 12 * L * C^2 + V * C    the weights that enter a matrix product: per block c_attn 3C^2,
//                                  attn.c_proj C^2, mlp.c_fc 4C^2, mlp.c_proj 4C^2; the tied head
//                                  V*C once (embedding lookups, biases and LayerNorms are not GEMMs)
//   12 * L * T * C                 attention's q k^T and p v, forward 4 T C per token and layer,
//                                  backward twice that, over the FULL T x T score matrix (as
//                                  nanoGPT/PaLM count it); a causal kernel computes about half of it.
// LayerNorm, GELU, softmax, the loss and AdamW are memory-bound and not counted.
//
// Then a per-phase profile of the same model, rebuilt from its layers over a ParamStore exactly
// as models/gpt.cpp and nn/transformer_block.cpp wire them (the same Embedding, LayerNorm, Linear,
// Activation layers and the Backend's attention op), with a clock around each call:
//   embed      the wte lookup and the wpe rows added onto it; backward: both scatter-adds
//   layernorm  ln_1, ln_2, ln_f forward and backward
//   attention  the flash-attention kernel alone (attention_forward / attention_backward)
//   linear     c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj forward and backward (GEMMs + bias; under
//              bf16 also the roundings of x, W and dy to bf16)
//   gelu       the exact GELU forward and backward
//   residual   the residual adds of forward and the gradient adds of backward
//   head       logits = ln_f(x) wte^T and its two backward GEMMs (the same WeightProduct as the model)
//   loss       cross-entropy forward (loss sum) and backward (dlogits)
//   clip, optimizer, zero_grad
// The profile's sum is reported next to the real step's median so any gap is visible.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/backend.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/isa.h"
#include "core/arena.h"
#include "core/rng.h"
#include "models/gpt.h"
#include "models/model.h"
#include "nn/activation.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/params.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/objective.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "train/step.h"

using namespace seqtrain;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace seqtrain::bench;

namespace {

struct Args {
  std::string shape = "cpu";
  int64_t batch = 0;  // 0: the shape's own
  std::string precision = "fp32";
  int threads = 2;
  int steps = 10;
  int warmup = 2;
  int profile_steps = -1;
  double peak_gflops = 0;
  int64_t vocab = 85;
  std::string rev = "unknown";
  std::string json_out;
  bool cpu_clock = false;  // --clock cpu: steps timed by the process CPU clock (use with --threads 1)
};

struct GptShape {
  int64_t layers, heads, embd, block, batch;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_gpt: the char GPT's training step"};
  app.add_option("--shape", a.shape, "nanoGPT's shakespeare_char CPU or GPU shape")->check(CLI::IsMember({"cpu", "gpu"}));
  app.add_option("--batch", a.batch, "0: the shape's")->check(CLI::NonNegativeNumber);
  app.add_option("--precision", a.precision)->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--threads", a.threads)->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--profile-steps", a.profile_steps, "-1: --steps");
  app.add_option("--peak-gflops", a.peak_gflops, "0: measure");
  app.add_option("--vocab", a.vocab)->check(CLI::PositiveNumber);
  app.add_option("--rev", a.rev);
  app.add_option("--json", a.json_out);
  std::string clock = "wall";
  app.add_option("--clock", clock, "cpu: the process CPU clock (with --threads 1)")->check(CLI::IsMember({"wall", "cpu"}));
  bench::parse_flags(app, argc, argv);
  a.cpu_clock = clock == "cpu";
  if (a.profile_steps < 0) a.profile_steps = a.steps;
  return a;
}

GptShape shape_of(const Args& a) {
  GptShape s = a.shape == "cpu" ? GptShape{4, 4, 128, 64, 12} : GptShape{6, 6, 384, 256, 64};
  if (a.batch > 0) s.batch = a.batch;
  return s;
}

ModelSpec gpt_spec(const GptShape& s, const Args& a) {
  ModelSpec m;
  m.type = "gpt";
  m.vocab_size = a.vocab;
  m.lookback = s.block;
  m.layers = s.layers;
  m.heads = s.heads;
  m.hidden = s.embd;
  m.bias = true;
  m.dropout = 0.f;
  m.input_size = 1;
  m.output_size = s.block;
  m.decay = "2d";
  return m;
}

OptimizerOptions adamw() {
  return OptimizerOptions{.name = "adamw", .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
}

struct Data {
  std::vector<int64_t> x, y;
  Tensor xt, yt;
};

Data make_data(const GptShape& s, int64_t vocab) {
  Data d;
  d.x.resize(s.batch * s.block);
  d.y.resize(s.batch * s.block);
  Rng rng(1234);
  for (auto& v : d.x) v = static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab - 1))) + 1;
  for (size_t i = 0; i + 1 < d.x.size(); ++i) d.y[i] = d.x[i + 1];
  d.y.back() = d.x.front();
  d.xt = Tensor(d.x.data(), {s.batch, s.block}, DType::i64);
  d.yt = Tensor(d.y.data(), {s.batch, s.block}, DType::i64);
  return d;
}

double step_flops(const GptShape& s, int64_t V) {
  const double L = s.layers, C = s.embd, T = s.block, tokens = static_cast<double>(s.batch * s.block);
  const double n_mm = 12.0 * L * C * C + static_cast<double>(V) * C;
  return tokens * (6.0 * n_mm + 12.0 * L * T * C);
}

// ---- the full TrainStep ------------------------------------------------------------------------

json bench_full_step(const GptShape& s, const Args& a, const Data& d) {
  auto model = make_model(gpt_spec(s, a), ModelEnv{.precision = resolve_precision(a.precision)});
  Rng rng(42);
  model->init(rng);
  auto opt = make_optimizer(adamw(), model->params().backend());
  opt->set_decay_mask(model->params().decay_mask());
  auto sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 1e-3});
  StepOptions so;
  so.loss = LossKind::cross_entropy;
  so.grad_clip = 1.0;
  TrainStep step(*model, *opt, *sched, so);
  const StepTimes t = time_steps(step, d.xt, d.yt, a.warmup, a.steps, a.cpu_clock);
  return {{"ms_median", median(t.ms)},
          {"ms_min", *std::min_element(t.ms.begin(), t.ms.end())},
          {"ms_all", t.ms},
          {"first_step_ms", t.first_ms},
          {"involuntary_switches", t.switches},
          {"mean_loss", step.take_loss()},
          {"params", model->params().size()},
          {"activation_mb", step.activation_bytes() / 1048576.0}};
}

// ---- per-phase profile: the model rebuilt from its layers --------------------------------------

struct ProfBlock {
  LayerNorm ln_1;
  Linear c_attn, attn_proj;
  LayerNorm ln_2;
  Linear c_fc;
  Activation gelu{ActKind::gelu};
  Linear mlp_proj;
  Tensor qkv, y, lse;
  ProfBlock(ParamStore& ps, const std::string& p, int64_t C, bool bias, DType compute)
      : ln_1(ps, p + ".ln_1", C, bias),
        c_attn(ps, p + ".attn.c_attn", C, 3 * C, bias, compute),
        attn_proj(ps, p + ".attn.c_proj", C, C, bias, compute),
        ln_2(ps, p + ".ln_2", C, bias),
        c_fc(ps, p + ".mlp.c_fc", C, 4 * C, bias, compute),
        mlp_proj(ps, p + ".mlp.c_proj", 4 * C, C, bias, compute) {}
};

const char* kPhases[] = {"embed", "layernorm", "attention", "linear", "gelu", "residual",
                         "head", "loss", "clip", "optimizer", "zero_grad"};

json bench_profile(const GptShape& s, const Args& a, const Data& d) {
  const int64_t B = s.batch, T = s.block, C = s.embd, V = a.vocab, H = s.heads;
  const DType adt = a.precision == "bf16" ? DType::bf16 : DType::f32;
  ParamStore ps;
  ps.set_backend(backend_named("cpu"));
  Backend& be = ps.backend();
  Embedding wte(ps, "transformer.wte", V, C), wpe(ps, "transformer.wpe", T, C);
  std::vector<std::unique_ptr<ProfBlock>> blocks;
  for (int64_t l = 0; l < s.layers; ++l)
    blocks.push_back(std::make_unique<ProfBlock>(ps, "transformer.h." + std::to_string(l), C, true, adt));
  LayerNorm ln_f(ps, "transformer.ln_f", C, true);
  WeightProduct head(be, adt, "head");
  // As TransformerBlock: under bf16 ln_1, ln_2, GELU and ln_f write the next Linear's rounded input.
  const DType half_out = half_output_type(be, adt);
  ps.finalize();
  apply_decay_policy(ps, "2d");
  {
    Rng rng(42);
    init_nanogpt(ps, s.layers, rng);
  }
  auto opt = make_optimizer(adamw(), be);
  opt->set_decay_mask(ps.decay_mask());
  auto objective = make_objective(LossKind::cross_entropy, LossOptions{}, ObjectiveTask::classify);
  Arena arena;
  constexpr int P = sizeof(kPhases) / sizeof(kPhases[0]);
  enum { EMBED, LN, ATT, LIN, GELU, RES, HEAD, LOSS, CLIP, OPT, ZERO };
  std::vector<std::vector<double>> fwd_t(P), bwd_t(P), all_t(P);
  std::vector<double> total;
  auto attn_args = [&](ProfBlock& b) {
    AttentionArgs x;
    x.batch = B; x.seq = T; x.heads = H; x.channels = C;
    x.compute = adt;
    x.qkv = b.qkv.f32(); x.y = b.y.f32(); x.lse = b.lse.f32();
    return x;
  };
  for (int it = 0; it < a.warmup + a.profile_steps; ++it) {
    double f[P] = {}, g[P] = {};
    auto tick = [](Clock::time_point& t0) {
      const double ms = ms_since(t0);
      t0 = Clock::now();
      return ms;
    };
    arena.reset();
    auto t0 = Clock::now();
    // forward
    Tensor pos = arena.tensor({B, T}, DType::i64);
    for (int64_t i = 0; i < B * T; ++i) pos.data<int64_t>()[i] = i % T;
    Tensor x = wte.forward(d.xt, arena);
    wpe.forward_add(pos, x, arena);
    f[EMBED] += tick(t0);
    for (auto& bp : blocks) {
      ProfBlock& b = *bp;
      Tensor h1 = b.ln_1.forward(x, arena, half_out);
      f[LN] += tick(t0);
      b.qkv = b.c_attn.forward(h1, arena);
      f[LIN] += tick(t0);
      b.y = arena.tensor({B, T, C});
      b.lse = arena.tensor({B, H, T});
      be.attention_forward(attn_args(b));
      f[ATT] += tick(t0);
      Tensor ao = b.attn_proj.forward(b.y, arena);
      f[LIN] += tick(t0);
      Tensor x1 = residual_add(be, x, ao, arena);
      f[RES] += tick(t0);
      Tensor h2 = b.ln_2.forward(x1, arena, half_out);
      f[LN] += tick(t0);
      Tensor u = b.c_fc.forward(h2, arena);
      f[LIN] += tick(t0);
      Tensor gu = b.gelu.forward(u, arena, half_out);
      f[GELU] += tick(t0);
      Tensor m = b.mlp_proj.forward(gu, arena);
      f[LIN] += tick(t0);
      x = residual_add(be, x1, m, arena);
      f[RES] += tick(t0);
    }
    Tensor hin = ln_f.forward(x, arena, half_out);
    f[LN] += tick(t0);
    Tensor logits = arena.tensor({B, T, V});
    head.forward(hin, ps.param(wte.weight).f32(), nullptr, V, logits.f32(), arena);
    f[HEAD] += tick(t0);
    const ObjectiveSum sum = objective->forward(logits, batch_of_targets(d.yt));
    Tensor dlogits = arena.tensor(logits.shape);
    objective->backward(logits, batch_of_targets(d.yt), dlogits, 1.0 / static_cast<double>(sum.count));
    f[LOSS] += tick(t0);
    // backward
    Tensor dx = arena.tensor({B, T, C});
    head.backward(dlogits.f32(), ps.param(wte.weight).f32(), ps.grad(wte.weight).f32(), nullptr, dx.f32(), arena);
    g[HEAD] += tick(t0);
    dx = ln_f.backward(dx, arena);
    g[LN] += tick(t0);
    for (size_t l = blocks.size(); l-- > 0;) {
      ProfBlock& b = *blocks[l];
      Tensor dgu = b.mlp_proj.backward(dx, arena);
      g[LIN] += tick(t0);
      Tensor du = b.gelu.backward(dgu, arena);
      g[GELU] += tick(t0);
      Tensor dh2 = b.c_fc.backward(du, arena);
      g[LIN] += tick(t0);
      Tensor dl2 = b.ln_2.backward(dh2, arena);
      g[LN] += tick(t0);
      Tensor dx1 = residual_add(be, dx, dl2, arena);
      g[RES] += tick(t0);
      Tensor dy = b.attn_proj.backward(dx1, arena);
      g[LIN] += tick(t0);
      Tensor dqkv = arena.tensor(b.qkv.shape);
      be.attention_backward(attn_args(b), dy.f32(), dqkv.f32());
      g[ATT] += tick(t0);
      Tensor dh1 = b.c_attn.backward(dqkv, arena);
      g[LIN] += tick(t0);
      Tensor dl1 = b.ln_1.backward(dh1, arena);
      g[LN] += tick(t0);
      dx = residual_add(be, dx1, dl1, arena);
      g[RES] += tick(t0);
    }
    wte.backward(dx, arena);
    wpe.backward(dx, arena);
    g[EMBED] += tick(t0);
    clip_grad_norm(be, ps.grads(), ps.size(), 1.0);
    g[CLIP] += tick(t0);
    opt->step(ps.params(), ps.grads(), ps.size(), 1e-3);
    g[OPT] += tick(t0);
    ps.zero_grad();
    g[ZERO] += tick(t0);
    if (it < a.warmup) continue;
    double sum_ms = 0;
    for (int p = 0; p < P; ++p) {
      fwd_t[p].push_back(f[p]);
      bwd_t[p].push_back(g[p]);
      all_t[p].push_back(f[p] + g[p]);
      sum_ms += f[p] + g[p];
    }
    total.push_back(sum_ms);
  }
  json phases = json::object();
  for (int p = 0; p < P; ++p)
    phases[kPhases[p]] = {{"forward_ms", median(fwd_t[p])}, {"backward_ms", median(bwd_t[p])},
                          {"ms", median(all_t[p])}};
  // FLOPs of the GEMM phases, for their own GFLOP/s (same convention as the step's).
  const double tokens = static_cast<double>(B * T), L = s.layers;
  const double lin_flops = tokens * 6.0 * 12.0 * L * C * C, head_flops = tokens * 6.0 * V * C;
  const double att_flops_full = tokens * 12.0 * L * T * C;
  return {{"phases", phases},
          {"sum_ms_median", median(total)},
          {"linear_flops", lin_flops},
          {"head_flops", head_flops},
          {"attention_flops_full_T", att_flops_full},
          {"attention_flops_causal", att_flops_full * (T + 1) / (2.0 * T)}};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const GptShape s = shape_of(a);
  set_cpu_threads(a.threads);
  json out;
  out["engine"] = "seqtrain";
  out["version"] = a.rev;
  const dnnl_version_t* v = dnnl_version();
  out["onednn"] = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  out["isa"] = isa_summary();
  out["shape_name"] = a.shape;
  out["shape"] = {{"layers", s.layers}, {"heads", s.heads}, {"n_embd", s.embd}, {"block", s.block},
                  {"batch", s.batch}, {"vocab", a.vocab}};
  out["precision"] = a.precision;
  out["mode"] = "seqtrain";
  out["threads"] = a.threads;
  out["clock"] = a.cpu_clock ? "cpu" : "wall";
  out["steps"] = a.steps;
  out["warmup"] = a.warmup;
  out["load_before"] = loadavg();
  out["peak_gflops"] = a.peak_gflops;
  try {
    const Data d = make_data(s, a.vocab);
    const double rss0 = peak_rss_mb();
    json step = bench_full_step(s, a, d);
    out["rss_start_mb"] = rss0;
    out["peak_rss_mb"] = peak_rss_mb();
    const double ms = step["ms_median"].get<double>(), flops = step_flops(s, a.vocab);
    out["step"] = step;
    out["ms_per_step"] = ms;
    out["tokens_per_s"] = static_cast<double>(s.batch * s.block) / (ms / 1e3);
    out["flops_per_step"] = flops;
    out["gflops"] = flops / ms / 1e6;
    out["pct_peak"] = a.peak_gflops > 0 ? json(100.0 * flops / ms / 1e6 / a.peak_gflops) : json(nullptr);
    if (a.profile_steps > 0) out["profile"] = bench_profile(s, a, d);
  } catch (const std::exception& e) {
    std::cerr << "bench_gpt: " << e.what() << "\n";
    return 1;
  }
  out["load_after"] = loadavg();
  const std::string text = out.dump(2);
  std::cout << text << "\n";
  std::cerr << std::fixed << std::setprecision(1) << "bench_gpt: " << a.shape << " batch " << s.batch << " "
            << a.precision << ": " << out["ms_per_step"].get<double>() << " ms/step, "
            << out["tokens_per_s"].get<double>() << " tokens/s, " << out["gflops"].get<double>() << " GFLOP/s\n";
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    f << text << "\n";
    if (!f) {
      std::cerr << "bench_gpt: cannot write " << a.json_out << "\n";
      return 1;
    }
  }
  return 0;
}
