// bench_pretrain: one masked-pretraining step at moola's shape (batch 512, T 105, F 4): drawing the
// batch's masks (patch masking at 15%, patches of 8 steps, as the loader's workers draw them), the
// encoder over the masked inputs, the LayerNorm-MLP decoder, the masked MSE and AdamW, for
//   --model bilstm        a 2-layer bidirectional LSTM, hidden 128 (moola's encoder)
//   --model transformer   4 pre-LN blocks, d_model 128, 4 heads, FF 512, learned positions
// and, with --finetune frozen|unfrozen, a fine-tuning classifier step of the same encoder (mean
// pooling, 2 classes) with the encoder frozen (no update, no backward through it) or learning.
// bench/torch_pretrain.py is the PyTorch peer; bench/pretrain.sh runs both and reports.
//
//   bench_pretrain [--model bilstm|transformer] [--finetune none|frozen|unfrozen] [--threads 2]
//                  [--steps 10] [--warmup 2] [--batch 512] [--std-penalty W] [--json OUT]
//
// GFLOP/s counts the encoder's matrix products (forward 1x, backward 2x; a frozen step's encoder
// forward only): bilstm 2 * 4H (in + H) per step, direction and layer; transformer
// tokens * (2 F C + L (8 C^2 + 4 C FF + 4 T C)).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "core/rng.h"
#include "data/masking.h"
#include "models/registry.h"
#include "optim/adamw.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"
#include "train/objective.h"
#include "train/step.h"

using namespace seqtrain;
using json = nlohmann::json;

namespace {

struct Args {
  std::string model = "bilstm", finetune = "none", json_out;
  int threads = 2, steps = 10, warmup = 2;
  int64_t batch = 512;
  double std_penalty = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_pretrain: one masked-pretraining (or fine-tuning) step at moola's shape"};
  app.add_option("--model", a.model)->check(CLI::IsMember({"bilstm", "transformer"}));
  app.add_option("--finetune", a.finetune)->check(CLI::IsMember({"none", "frozen", "unfrozen"}));
  app.add_option("--threads", a.threads)->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--batch", a.batch)->check(CLI::PositiveNumber);
  app.add_option("--std-penalty", a.std_penalty, "train.masking.std_penalty");
  app.add_option("--json", a.json_out);
  bench::parse_flags(app, argc, argv);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_cpu_threads(a.threads);
  const int64_t B = a.batch, T = 105, F = 4, H = 128, L = a.model == "bilstm" ? 2 : 4;
  const bool pretrain = a.finetune == "none";
  ModelSpec spec;
  spec.type = a.model == "bilstm" ? "lstm" : "transformer";
  spec.input_size = F;
  spec.lookback = T;
  spec.hidden = H;
  spec.layers = L;
  spec.bidirectional = a.model == "bilstm";
  spec.heads = 4;
  spec.pooling = "mean";
  spec.output_size = pretrain ? F : 2;
  spec.reconstruct = pretrain;
  spec.std_penalty = static_cast<float>(a.std_penalty);
  spec.autotune = true;
  std::unique_ptr<Model> model = build_model(spec);
  Rng rng(1);
  model->init(rng);

  std::vector<float> x(static_cast<size_t>(B * T * F)), mask(x.size());
  for (float& v : x) v = rng.normal();
  std::vector<int64_t> samples(static_cast<size_t>(B)), labels(static_cast<size_t>(B));
  std::iota(samples.begin(), samples.end(), int64_t{0});
  for (auto& l : labels) l = static_cast<int64_t>(rng.below(2));
  SampleMasking masking;
  masking.options.strategy = MaskStrategy::patch;
  masking.options.ratio = 0.15;
  masking.options.patch_size = 8;
  Batch batch = batch_of(Tensor(x.data(), {B, T, F}));
  if (pretrain) {
    batch.targets = batch.inputs;
    batch.loss_mask = Tensor(mask.data(), {B, T, F});
  } else {
    batch.targets = Tensor(labels.data(), {B}, DType::i64);
  }

  OptimizerOptions oo;
  oo.weight_decay = 0.01;
  AdamW opt(oo, model->params().backend());
  if (a.finetune == "frozen") {
    // The fine-tuning schedule's first epochs: every tensor but the head's frozen.
    ParamGroup head, rest;
    head.prefix = "head.";
    rest.prefix = "";
    rest.frozen = true;
    const std::vector<ParamGroup> groups{head, rest};
    const std::vector<ParamGroup> per_entry = entry_groups(model->params(), groups);
    apply_frozen(model->params(), per_entry);
    opt.set_groups(group_runs(model->params(), per_entry));
  }
  auto sched = make_schedule(ScheduleOptions{});
  StepOptions so;
  so.grad_clip = 1.0;
  const auto objective = pretrain ? make_objective(LossKind::mse, {}, ObjectiveTask::masked_pretrain)
                                  : make_objective(LossKind::cross_entropy, {}, ObjectiveTask::classify);
  so.objective = objective.get();
  TrainStep step(*model, opt, *sched, so);

  std::vector<double> ms, mask_ms;
  double first = 0;
  const long sw0 = bench::involuntary_switches();
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    const auto t0 = bench::Clock::now();
    if (pretrain) fill_masks(masking, samples, i, T, F, nullptr, mask.data());
    const double m = bench::ms_since(t0);
    step.run(batch, static_cast<uint64_t>(i));
    const double t = bench::ms_since(t0);
    if (i == 0) first = t;
    if (i >= a.warmup) {
      ms.push_back(t);
      mask_ms.push_back(m);
    }
  }
  const double med = bench::median(ms);
  const double fwd = a.model == "bilstm"
                         ? 2.0 * B * T * 2 /*directions*/ * (4.0 * H * (F + H) + 4.0 * H * (2 * H + H))
                         : static_cast<double>(B * T) * (2.0 * F * H + L * (8.0 * H * H + 16.0 * H * H + 4.0 * T * H));
  const double flops = fwd * (a.finetune == "frozen" ? 1.0 : 3.0);
  json j = {{"engine", "seqtrain"},
            {"model", a.model},
            {"finetune", a.finetune},
            {"batch", B},
            {"threads", a.threads},
            {"ms_step", med},
            {"mask_ms", bench::median(mask_ms)},
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
