// bench_cuda: seqtrain's whole training step on a GPU (the CUDA plugin's backend), the side of
// bench/torch_cuda.py that the device script (bench/device/check.sh) pairs with PyTorch.
//
//   bench_cuda --workload W1|moola|gpt [--precision fp32|bf16|fp16] [--steps S] [--warmup K] [--json OUT]
//              [--label L]   (L is copied into the JSON: what else the caller set, e.g. an environment variable)
//              [--graphs auto|off] (runtime.cuda_graphs; off by default, so rows stay comparable across versions)
//              [--dropout P] (the workload's dropout replaced: 0 lets the GPT's step be captured)
//
// Workloads, each as its PyTorch peer builds it (bench/torch_cuda.py):
//   W1     batch 256, lookback 150, 8 features, LSTM hidden 128 x 2, head Linear(128, 1), MSE
//   moola  batch 512, lookback 105, 4 features, BiLSTM hidden 128 x 2, head Linear(256, 1), MSE
//   gpt    nanoGPT's shakespeare_char GPU recipe: batch 64, block 256, 6 layers, 6 heads, n_embd
//          384, no biases, dropout 0.2, vocabulary 65, cross-entropy over every position
// AdamW (lr 1e-3; the GPT with betas (0.9, 0.99), weight decay 0.1 on 2-D tensors), clipping at 1.
// The step is TrainStep::run with the batch on the host, as the training loop hands it over.
// Timing: wall time of S steps after K warm-up ones, with the device drained before the first and
// after the last (a parameter read back); ms/step is that total over S. FLOPs as bench_step and
// bench_gpt count them (multiply-add = 2, backward = 2x forward).
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/autotune.h"
#include "bench_flags.h"
#include "backend/cuda_plugin.h"
#include "core/rng.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

using namespace seqtrain;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string workload = "W1";
  std::string precision = "fp32";
  int steps = 20;
  int warmup = 3;
  std::string json_out;
  std::string label;
  std::string graphs = "off";
  float dropout = -1.f;  // < 0: the workload's own
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_cuda: one training step on the GPU (W1, moola's BiLSTM or the char GPT)"};
  app.add_option("--workload", a.workload)->check(CLI::IsMember({"W1", "moola", "gpt"}));
  app.add_option("--precision", a.precision)->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--steps", a.steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--json", a.json_out);
  app.add_option("--label", a.label, "the report's name for this run");
  app.add_option("--graphs", a.graphs, "runtime.cuda_graphs")->check(CLI::IsMember({"auto", "off"}));
  app.add_option("--dropout", a.dropout, "< 0: the workload's own");
  bench::parse_flags(app, argc, argv);
  return a;
}

struct Workload {
  ModelSpec spec;
  int64_t batch = 0;
  double flops = 0;
  bool lm = false;
};

Workload workload_of(const std::string& name) {
  Workload w;
  ModelSpec& m = w.spec;
  if (name == "gpt") {
    const int64_t B = 64, T = 256, L = 6, C = 384, V = 65;
    m.type = "gpt";
    m.vocab_size = V;
    m.lookback = T;
    m.layers = L;
    m.heads = 6;
    m.hidden = C;
    m.bias = false;
    m.dropout = 0.2f;
    m.output_size = T;
    m.decay = "2d";
    w.batch = B;
    w.lm = true;
    w.flops = double(B * T) * (6.0 * (12.0 * L * C * C + double(V) * C) + 12.0 * L * T * C);
    return w;
  }
  const bool moola = name == "moola";
  m.type = "lstm";
  m.input_size = moola ? 4 : 8;
  m.lookback = moola ? 105 : 150;
  m.hidden = 128;
  m.layers = 2;
  m.bidirectional = moola;
  m.output_size = 1;
  w.batch = moola ? 512 : 256;
  const double dirs = moola ? 2 : 1, H = 128, T = double(m.lookback), N = double(w.batch);
  double fwd = 0;
  for (int l = 0; l < 2; ++l) {
    const double C = l == 0 ? double(m.input_size) : dirs * H;
    fwd += dirs * 2.0 * T * N * 4.0 * H * (C + H);
  }
  fwd += 2.0 * N * dirs * H;
  w.flops = 3.0 * fwd;
  return w;
}

Precision precision_of(const std::string& p) {
  if (p == "bf16") return Precision{DType::bf16, false};
  if (p == "fp16") return Precision{DType::f16, true};
  return Precision{};
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  const CudaAvailability& avail = cuda_availability();
  if (avail.devices == 0) {
    std::cerr << "bench_cuda: no usable CUDA GPU: " << avail.why_none << "\n";
    return 2;
  }
  Backend& gpu = cuda_backend(0);
  Workload w = workload_of(a.workload);
  const Precision prec = precision_of(a.precision);
  // As `seqtrain train` with runtime.autotune (the default): the recurrent layers time cuDNN's
  // algorithms at the first (warm-up) step.
  auto tuner = std::make_shared<Autotuner>();
  w.spec.autotune = true;
  if (a.dropout >= 0) w.spec.dropout = a.dropout;
  auto model = make_model(w.spec, ModelEnv{.autotuner = tuner, .precision = prec, .backend = &gpu});
  Rng rng(42);
  model->init(rng);
  OptimizerOptions oo{.name = "adamw", .lr = 1e-3};
  if (w.lm) {
    oo.beta2 = 0.99;
    oo.weight_decay = 0.1;
  }
  auto opt = make_optimizer(oo, gpu);
  if (w.lm) opt->set_decay_mask(model->params().decay_mask());
  auto sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 1e-3});
  LossScaler scaler(LossScalerOptions{});
  StepOptions so;
  so.loss = w.lm ? LossKind::cross_entropy : LossKind::mse;
  so.grad_clip = 1.0;
  if (prec.loss_scaling) so.scaler = &scaler;
  so.graphs = a.graphs == "auto";
  so.note = [](const std::string& line) { std::cerr << "bench_cuda: " << line << "\n"; };
  TrainStep step(*model, *opt, *sched, so);

  // Fixed-seed data on the host, as a loader hands it over.
  Rng drng(1234);
  std::vector<float> xf, yf;
  std::vector<int64_t> xi, yi;
  Tensor x, y;
  const ModelSpec& m = w.spec;
  if (w.lm) {
    xi.resize(w.batch * m.lookback);
    yi.resize(xi.size());
    for (auto& v : xi) v = static_cast<int64_t>(drng.below(static_cast<uint64_t>(m.vocab_size)));
    for (size_t i = 0; i < xi.size(); ++i) yi[i] = xi[(i + 1) % xi.size()];
    x = Tensor(xi.data(), {w.batch, m.lookback}, DType::i64);
    y = Tensor(yi.data(), {w.batch, m.lookback}, DType::i64);
  } else {
    xf.resize(w.batch * m.lookback * m.input_size);
    yf.resize(w.batch);
    for (auto& v : xf) v = static_cast<float>(drng.normal());
    for (auto& v : yf) v = static_cast<float>(drng.normal());
    x = Tensor(xf.data(), {w.batch, m.lookback, m.input_size}, DType::f32);
    y = Tensor(yf.data(), {w.batch, 1}, DType::f32);
  }

  // Draining the device: a read of one parameter waits for everything queued before it.
  float probe = 0;
  auto drain = [&] { gpu.copy_to_host(model->params().params(), &probe, sizeof probe); };
  const auto t_first = Clock::now();
  for (int i = 0; i < a.warmup; ++i) step.run(x, y, static_cast<uint64_t>(i));
  drain();
  const double warm_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_first).count();
  (void)step.take_loss();
  std::vector<double> ms_each;
  const auto t0 = Clock::now();
  for (int i = 0; i < a.steps; ++i) {
    const auto s0 = Clock::now();
    step.run(x, y, static_cast<uint64_t>(a.warmup + i));
    ms_each.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s0).count());
  }
  drain();
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  for (const auto& line : tuner->log_lines()) std::cerr << "bench_cuda: " << line << "\n";
  const double ms = total_ms / a.steps;
  const json out = {{"engine", "seqtrain"},
                    {"device", gpu.name()},
                    {"workload", a.workload},
                    {"precision", a.precision},
                    {"batch", w.batch},
                    {"steps", a.steps},
                    {"warmup", a.warmup},
                    {"warmup_ms", warm_ms},
                    {"ms_per_step", ms},
                    {"ms_each", ms_each},
                    {"flops_per_step", w.flops},
                    {"tflops", w.flops / ms / 1e9},
                    {"mean_loss", step.take_loss()},
                    {"params", model->params().size()},
                    {"graphs", a.graphs},
                    {"captures", step.graphs() ? step.graphs()->captures() : 0},
                    {"replays", step.graphs() ? step.graphs()->replays() : 0},
                    {"label", a.label}};
  std::cout << out.dump() << "\n";
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  std::cerr << "bench_cuda: " << a.workload << " " << a.precision << ": " << ms << " ms/step, "
            << w.flops / ms / 1e9 << " TFLOP/s\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_cuda: " << e.what() << "\n";
  return 1;
}
