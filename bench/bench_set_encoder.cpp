// bench_set_encoder: one training step of the set encoder at the AAM shape (the microbiome system
// seqtrain replaces): batch 64 sets padded to 256 elements of 64 features, model.type
// transformer with d_model 128, 4 layers, 4 heads, FF 512, no positions, mean pooling, a 4-class
// head, AdamW, clipping at 1.0 — timed for three length patterns of the same padded batch:
//   full  every set has 256 elements (no padding)
//   aam   lengths spread over 20..256 (the AAM data's spread)
//   half  every set has 128 elements (half the steps are padding)
// bench/torch_set_encoder.py is the PyTorch peer; bench/set_encoder.sh runs both and reports.
//
//   bench_set_encoder [--threads 2] [--steps 10] [--warmup 2] [--lengths full|aam|half]
//                     [--batch 64] [--json OUT]
//
// GFLOP/s counts every padded position (the work a dense engine does), by the formula
//   tokens * 3 * (2 F C + L (8 C^2 + 4 C FF + 4 T C)) with tokens = B * T: forward 1x, backward 2x.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "core/rng.h"
#include "models/registry.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "train/objective.h"
#include "train/step.h"

using namespace seqtrain;
using json = nlohmann::json;

namespace {

struct Args {
  std::string lengths = "aam", json_out;
  int threads = 2, steps = 10, warmup = 2;
  int64_t batch = 64;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_set_encoder: the set encoder's step over variable-length sets"};
  app.add_option("--threads", a.threads)->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--lengths", a.lengths)->check(CLI::IsMember({"full", "aam", "half"}));
  app.add_option("--batch", a.batch)->check(CLI::PositiveNumber);
  app.add_option("--json", a.json_out);
  bench::parse_flags(app, argc, argv);
  return a;
}

// The lengths of each pattern; aam's spread evenly over 20..T by a formula torch_set_encoder.py
// repeats, so every engine times the same batch.
std::vector<int64_t> lengths_of(const std::string& kind, int64_t B, int64_t T) {
  std::vector<int64_t> len(static_cast<size_t>(B), T);
  for (int64_t i = 0; i < B; ++i) {
    if (kind == "half") len[static_cast<size_t>(i)] = T / 2;
    if (kind == "aam") len[static_cast<size_t>(i)] = 20 + (i * 97) % (T - 20 + 1);
  }
  return len;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_cpu_threads(a.threads);
  const int64_t B = a.batch, T = 256, F = 64, C = 128, L = 4, H = 4, FF = 4 * C, K = 4;
  ModelSpec spec;
  spec.type = "transformer";
  spec.input_size = F;
  spec.lookback = T;
  spec.hidden = C;
  spec.layers = L;
  spec.heads = H;
  spec.output_size = K;
  spec.positions = "none";
  spec.pooling = "mean";
  std::unique_ptr<Model> model = build_model(spec);
  Rng rng(1);
  model->init(rng);

  std::vector<float> x(static_cast<size_t>(B * T * F));
  for (float& v : x) v = rng.normal();
  std::vector<int64_t> labels(static_cast<size_t>(B)), len = lengths_of(a.lengths, B, T);
  for (auto& l : labels) l = static_cast<int64_t>(rng.below(K));
  std::vector<uint8_t> mask(static_cast<size_t>(B * T), 0);
  int64_t valid = 0;
  for (int64_t i = 0; i < B; ++i) {
    valid += len[static_cast<size_t>(i)];
    for (int64_t t = len[static_cast<size_t>(i)]; t < T; ++t) mask[static_cast<size_t>(i * T + t)] = 1;
  }
  Batch batch = batch_of(Tensor(x.data(), {B, T, F}));
  batch.targets = Tensor(labels.data(), {B}, DType::i64);
  batch.lengths = Tensor(len.data(), {B}, DType::i64);
  batch.key_padding_mask = Tensor(mask.data(), {B, T}, DType::u8);

  OptimizerOptions oo;
  oo.weight_decay = 0.01;
  AdamW opt(oo, model->params().backend());
  auto sched = make_schedule(ScheduleOptions{});
  StepOptions so;
  so.grad_clip = 1.0;
  const auto objective = make_objective(LossKind::cross_entropy, {}, ObjectiveTask::classify);
  so.objective = objective.get();
  TrainStep step(*model, opt, *sched, so);

  std::vector<double> ms;
  double first = 0;
  const long sw0 = bench::involuntary_switches();
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    const auto t0 = bench::Clock::now();
    step.run(batch, static_cast<uint64_t>(i));
    const double t = bench::ms_since(t0);
    if (i == 0) first = t;
    if (i >= a.warmup) ms.push_back(t);
  }
  const double med = bench::median(ms);
  const double flops = static_cast<double>(B * T) * 3.0 *
                       (2.0 * F * C + L * (8.0 * C * C + 4.0 * C * FF + 4.0 * T * C));
  json j = {{"engine", "seqtrain"},
            {"lengths", a.lengths},
            {"batch", B},
            {"valid_share", static_cast<double>(valid) / static_cast<double>(B * T)},
            {"threads", a.threads},
            {"ms_step", med},
            {"first_ms", first},
            {"gflops", flops / (med * 1e6)},
            {"peak_rss_mb", bench::peak_rss_mb()},
            {"switches", bench::involuntary_switches() - sw0},
            {"loadavg", bench::loadavg()},
            {"loss", step.take_loss()}};
  std::printf("%s\n", j.dump().c_str());
  if (!a.json_out.empty()) std::ofstream(a.json_out) << j.dump(2) << "\n";
  return 0;
}
