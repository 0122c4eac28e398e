#include "cli/commands.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "backend/cpu/dnnl_context.h"
#include "config/config.h"
#include "data/npy.h"
#include "data/zscore_source.h"
#include "io/atomic_dir.h"
#include "train/checkpoint.h"
#include "train/data_plan.h"
#include "backend/device_batch.h"
#include "train/load_model.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
bool windowed(const Config& config) { return config.data.source == "csv" || config.data.source == "synthetic"; }

struct Loaded {
  Config config;
  Dataset data;
  std::unique_ptr<Model> model;
};

// Rebuilds the model and the data of a checkpoint; with `input`, the data is that CSV, scaled
// with the checkpoint's own normalization statistics and cut into windows over all its rows.
Loaded load_for_inference(const CheckpointRef& ck, const std::string& input) {
  const std::string& dir = ck.dir;
  const nlohmann::json& st = ck.state;
  Loaded l;
  l.config = ck.config;
  Normalizer norm = Normalizer::from_json(st.at("normalizer"));
  if (!input.empty()) {
    l.config.data.source = "csv";
    l.config.data.path = fs::absolute(input).string();
    l.config.data.split = {1.0, 0.0, 0.0};
  }
  l.data = load_dataset(l.config, &norm);
  const DataShape shape{l.data.n_features(), l.config.data.lookback, l.config.data.horizon * l.data.n_targets()};
  l.model = load_model(dir, {.shape = shape}).model;
  return l;
}
}  // namespace

int run_train(const TrainArgs& a) {
  Config config;
  std::string out = a.out;
  if (!a.resume.empty()) {
    out = a.resume;
    const std::string cfg = (fs::path(out) / "config.yaml").string();
    ST_CHECK(fs::exists(cfg), "--resume {}: no config.yaml there; it is not a seqtrain run directory", out);
    config = load_config(cfg, a.overrides);
  } else {
    ST_CHECK(!a.config.empty(), "train needs a config file: seqtrain train CONFIG.yaml (see examples/)");
    config = load_config(a.config, a.overrides);
    if (out.empty()) out = (fs::path("runs") / fs::path(a.config).stem()).string();
  }
  if (a.threads >= 0) config.runtime.threads = a.threads;
  TrainOptions opt{out, !a.resume.empty(), a.overwrite, a.quiet};
  opt.stop = &signal_stop_token();  // SIGINT/SIGTERM (route_stop_signals in main)
  TrainSummary s = train(config, opt);
  // One "key: value" line each; a figure the run does not have (no test split, no last-value
  // baseline outside windowed forecasting) is left out rather than printed as 0.
  std::printf("run: %s\nstopped_by: %s\nsteps: %ld\nbest_val_loss: %.6f\n", out.c_str(), s.stopped_by.c_str(),
              (long)s.steps, s.best_val);
  if (s.test_loss) std::printf("test_loss: %.6f\n", *s.test_loss);
  if (s.test_accuracy) std::printf("test_accuracy: %.6f\n", *s.test_accuracy);
  if (s.baseline_val) std::printf("baseline_last_value_val_mse: %.6f\n", *s.baseline_val);
  if (s.skipped_steps > 0) std::printf("skipped_steps: %ld\n", (long)s.skipped_steps);
  std::printf("checkpoint_block_s: %.4f\n", s.checkpoint_block_s);
  // Interrupted: the shell convention 128 + signal (130 for Ctrl-C, 143 for SIGTERM).
  return s.stopped_by == "signal" ? 128 + (s.signal ? s.signal : SIGINT) : 0;
}

// eval of an npy or text run: its test (or validation) split read through the same data plan
// the trainer used, so the loss (and accuracy) are those of the run's test record. The plan is rebuilt
// from the source files, so files that changed since training are refused, not silently used.
int eval_planned_run(const CheckpointRef& ck, const EvalArgs& a) {
  const Config& config = ck.config;
  ST_CHECK(a.input.empty(),
           "--input takes a CSV for windowed forecasting runs; this run reads data.source '{}', and eval scores it "
           "on its own test split (data.npy.test_x/test_y, or the text file's test share): leave --input out",
           config.data.source);
  const DataPlan plan = plan_data(config);
  const nlohmann::json saved_norm = ck.state.value("normalizer", nlohmann::json());
  ST_CHECK(plan.normalizer == saved_norm,
           "the training files of data.source '{}' changed since this run was trained ({} holds other feature "
           "statistics): evaluate with the files it was trained on, or train again",
           config.data.source, ck.dir + "/state.json");
  const nlohmann::json saved_vocab = ck.state.value("vocab", nlohmann::json());
  ST_CHECK(plan.vocab_json == saved_vocab,
           "the text file {} (config key data.path) no longer has the vocabulary this run was trained with ({} "
           "holds it): evaluate with the text it was trained on, or train again",
           config.data.path, ck.dir + "/state.json");
  const bool val = a.split == "val";
  const BatchSource* split = val ? plan.val.get() : plan.test.get();
  ST_CHECK(split != nullptr,
           "nothing to evaluate: this {} run has no {} split (set data.npy.{}_x/{}_y, or a {} share in data.split for "
           "text){}", config.data.source, a.split, a.split, a.split, a.split, val ? "" : "; --split val scores the validation split");
  const DataShape shape{plan.features, plan.steps, plan.outputs, plan.vocab, plan.classes};
  std::unique_ptr<Model> model = load_model(ck.dir, {.shape = shape}).model;
  double accuracy = 0;
  const auto objective = make_objective(config, plan);
  const double loss = evaluate(*model, *split, plan.steps, plan.features, *objective, config.train.batch_size,
                               &accuracy);
  std::printf("%s: %ld\nloss: %.6f\n", plan.unit, (long)split->size(), loss);
  if (objective->has_accuracy()) std::printf("accuracy: %.6f\n", accuracy);
  if (plan.vocab > 0) std::printf("perplexity: %.6f\n", std::exp(loss));
  return 0;
}

int run_eval(const EvalArgs& a) {
  ST_CHECK(a.input.empty() || a.split == "test",
           "--split {} picks a split of the run, --input evaluates every window of a CSV: give one of them", a.split);
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  if (!windowed(ck.config)) return eval_planned_run(ck, a);
  Loaded l = load_for_inference(ck, a.input);
  const WindowDataset& split = !a.input.empty() ? l.data.train : a.split == "val" ? l.data.val : l.data.test;
  ST_CHECK(!split.empty(), "nothing to evaluate: the {} split has no window (pass --input CSV{})", a.split,
           a.split == "test" ? ", or --split val" : "");
  const double loss = evaluate(*l.model, split, l.config.train.loss, l.config.train.huber_delta, l.config.train.batch_size);
  // MAE and RMSE in the data's original units.
  Backend& backend = l.model->params().backend();
  Arena arena(backend);
  const int64_t B = l.config.train.batch_size;
  std::vector<float> x(B * split.x_size()), y(B * split.y_size()), p(B * split.y_size());
  double abs_sum = 0, sq_sum = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < split.size(); b += B) {
    const int64_t n = std::min(B, split.size() - b);
    split.fill_batch(b, n, x.data(), y.data());
    arena.reset();
    StepContext ctx(arena);
    const Batch batch = device_batch(batch_of(Tensor(x.data(), {n, split.lookback(), split.n_features()})), arena, backend);
    read_floats(backend, l.model->forward(batch, ctx), p.data());
    l.data.denormalize_targets(p.data(), n);
    l.data.denormalize_targets(y.data(), n);
    for (int64_t i = 0; i < n * split.y_size(); ++i) {
      const double e = p[i] - y[i];
      abs_sum += std::abs(e);
      sq_sum += e * e;
      ++count;
    }
  }
  std::printf("windows: %ld\nloss: %.6f\nmae: %.6f\nrmse: %.6f\n", (long)split.size(), loss, abs_sum / count,
              std::sqrt(sq_sum / count));
  return 0;
}

// predict of an npy run: the model's outputs for every sample of an X .npy, written as a
// float32 .npy — [N, *y's per-sample shape] for regression (in y's units: npy targets are not
// normalized), [N, classes] logits for labels. The input is z-scored with the statistics in
// state.json, so the training files are not needed.
int predict_npy(const CheckpointRef& ck, const PredictArgs& a) {
  const Config& config = ck.config;
  ST_CHECK(a.output.size() > 4 && a.output.substr(a.output.size() - 4) == ".npy",
           "--output {}: an npy run's predictions are written as a .npy array; give a path ending in .npy", a.output);
  ST_CHECK(ck.state.contains("io"),
           "{}/state.json has no \"io\" section (the model's input and output shapes, recorded since predict "
           "learned npy runs): checkpoints written by this seqtrain have it; train the run again to predict with it",
           ck.dir);
  const nlohmann::json& io = ck.state.at("io");
  const int64_t steps = io.at("steps"), features = io.at("features"), outputs = io.at("outputs");
  const int64_t classes = io.at("classes");
  const std::vector<int64_t> y_shape = io.at("y_shape");
  auto x = std::make_shared<NpySource>(NpySource::open(a.input));
  ST_CHECK(x->steps() == steps && x->features() == features,
           "--input {}: samples of {} steps x {} features, but the run was trained on {} x {} (X of shape [N, {}, {}])",
           a.input, x->steps(), x->features(), steps, features, steps, features);
  const int64_t n_samples = x->size();
  ZscoreSource input(x, Normalizer::from_json(ck.state.at("normalizer")), features);
  std::unique_ptr<Model> model = load_model(ck.dir, {.shape = DataShape{features, steps, outputs, 0, classes}}).model;
  std::vector<float> out(n_samples * outputs);
  forward_batches(*model, input, steps, features, config.train.batch_size,
                  [&](int64_t first, int64_t n, const Tensor& pred, float*, Arena&) {
                    ST_CHECK(pred.numel() == n * outputs, "predict: the model gave {} outputs for {} samples of {}",
                             pred.numel(), n, outputs);
                    read_floats(model->params().backend(), pred, out.data() + first * outputs);
                  });
  std::vector<int64_t> shape{n_samples};
  if (classes > 0) shape.push_back(classes);
  else shape.insert(shape.end(), y_shape.begin(), y_shape.end());
  write_npy_f32(a.output, shape, out.data());
  std::printf("wrote %s for %ld samples to %s\n", classes > 0 ? "class logits" : "predictions", (long)n_samples,
              a.output.c_str());
  return 0;
}

int run_predict(const PredictArgs& a) {
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  if (ck.config.data.source == "npy") return predict_npy(ck, a);
  ST_CHECK(windowed(ck.config),
           "predict writes forecasts for the windows of a CSV or the samples of an X .npy, but this run reads "
           "data.source '{}': use `seqtrain eval` for its test split, and `seqtrain generate` to sample text",
           ck.config.data.source);
  Loaded l = load_for_inference(ck, a.input);
  const WindowDataset& split = l.data.train;
  const int64_t B = l.config.train.batch_size, H = split.horizon();
  std::string csv;
  for (int64_t h = 0; h < H; ++h)
    for (const auto& t : l.data.targets) csv += (csv.empty() ? "" : ",") + t + "_t+" + std::to_string(h + 1);
  csv += "\n";
  Backend& backend = l.model->params().backend();
  Arena arena(backend);
  std::vector<float> x(B * split.x_size()), p(B * split.y_size());
  for (int64_t b = 0; b < split.size(); b += B) {
    const int64_t n = std::min(B, split.size() - b);
    split.fill_batch(b, n, x.data(), nullptr);
    arena.reset();
    StepContext ctx(arena);
    const Batch batch = device_batch(batch_of(Tensor(x.data(), {n, split.lookback(), split.n_features()})), arena, backend);
    read_floats(backend, l.model->forward(batch, ctx), p.data());
    l.data.denormalize_targets(p.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < split.y_size(); ++j) csv += fmt::format("{}{:.7g}", j ? "," : "", p[i * split.y_size() + j]);
      csv += "\n";
    }
  }
  write_file_atomic(a.output, csv);
  std::printf("wrote %ld forecasts to %s\n", (long)split.size(), a.output.c_str());
  return 0;
}

}  // namespace seqtrain
