#include "cli/commands.h"

#include "dist/device_communicator.h"
#include "dist/mpi_communicator.h"
#include "dist/mpi_session.h"
#include "cli/inputs.h"
#include "cli/plot_panels.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "backend/cpu/dnnl_context.h"
#include "backend/cuda_plugin.h"
#include "config/config.h"
#include "config/scalar.h"
#include "data/csv.h"
#include "data/fleet.h"
#include "data/npy.h"
#include "data/zscore_source.h"
#include "io/atomic_dir.h"
#include "train/checkpoint.h"
#include "train/data_plan.h"
#include "train/forecast_scorer.h"
#include "backend/device_batch.h"
#include "train/load_model.h"
#include "train/rank_start.h"
#include "train/resume.h"
#include "train/summary_json.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain {
namespace fs = std::filesystem;

// See cli/inputs.h.
Loaded load_for_inference(const CheckpointRef& ck, const std::string& input) {
  const std::string& dir = ck.dir;
  const nlohmann::json& st = ck.state;
  Loaded l;
  l.config = ck.config;
  Normalizer norm = Normalizer::from_json(st.at("normalizer"));
  if (!input.empty()) l.config.data = input_data(ck.config.data, input);
  l.data = load_dataset(l.config, &norm);
  if (!l.data.skipped_note.empty()) std::fprintf(stderr, "seqtrain: %s\n", l.data.skipped_note.c_str());
  l.model = load_model(dir, {.shape = window_shape(l.config, l.data)}).model;
  return l;
}

namespace {

// Runs the model over every window of `split` in order, a batch at a time, and hands each batch
// to `use`: its size and the forecasts in the data's units ([n, horizon * targets * levels], the
// quantile levels innermost; each window in its series' units).
void forecast_windows(Loaded& l, const WindowDataset& split,
                      const std::function<void(int64_t n, const float* p)>& use) {
  const int64_t levels = quantile_levels(l.config.train);
  std::vector<float> p(static_cast<size_t>(l.config.train.batch_size * split.y_size() * levels));
  forward_batches(*l.model, WindowSource(split), window_layout(split), l.config.train.batch_size,
                  [&](int64_t first, const Batch& host, const Batch&, const Tensor& pred, Arena&) {
                    read_floats(l.model->params().backend(), pred, p.data());
                    l.data.denormalize_windows(split, first, p.data(), host.count, levels);
                    use(host.count, p.data());
                  });
}

}  // namespace

// `train CONFIG --resume RUN`: CONFIG is compared with the run's config like --set is; a key a
// resumed run may change is taken, any other difference is refused by name.
// `stored_text`: run_config's text, as rank 0 read it (a data-parallel run's other ranks may not
// see the run directory).
Config resume_config(const TrainArgs& a, const std::string& run_config, const std::string& stored_text) {
  const Config stored =
      load_config_text(stored_text, run_config, fs::absolute(run_config).parent_path().string(), a.overrides);
  if (a.config.empty()) return stored;
  Config given = load_config(a.config, a.overrides);
  // A CONFIG that says train.batch_size: auto means the batch its run chose (config.yaml holds
  // it; an auto --set leaves both auto, and the loop reads it there): a resume never searches
  // again (train/batch_finder.h).
  if (given.train.batch_size == kAutoBatch) given.train.batch_size = stored.train.batch_size;
  const auto& ok = resume_changeable_keys();
  std::string refused, allowed;
  for (const auto& k : ok) allowed += (allowed.empty() ? "" : ", ") + k;
  for (const ConfigChange& c : config_differences(to_yaml(stored), to_yaml(given)))
    if (std::find(ok.begin(), ok.end(), c.key) == ok.end())
      refused += fmt::format("\n  {}: {} in {}, {} in {}", c.key, c.after, a.config, c.before, run_config);
  ST_CHECK(refused.empty(),
           "{} differs from the config of the run it would resume ({}):{}\na resumed run may change only {}. Resume "
           "with `seqtrain train --resume {}` (add --set for those keys), or train {} into a new --out",
           a.config, run_config, refused, allowed, a.resume, a.config);
  return given;
}

namespace {

// The run's config.yaml as the primary reads it, on every rank: no rank but the primary needs
// to see the run directory (docs/DISTRIBUTED.md). A primary that cannot read it says so once
// and every rank exits non-zero.
std::string run_config_text(const std::string& cfg, const std::string& run, dist::MpiCommunicator* mpi) {
  std::string text, error;
  if (!mpi || mpi->primary()) {
    std::ifstream in(cfg, std::ios::binary);
    if (!fs::exists(cfg)) {
      error = fmt::format("--resume {}: no config.yaml there; it is not a seqtrain run directory", run);
    } else if (!in) {
      error = fmt::format("--resume {}: cannot read {}; check its permissions", run, cfg);
    } else {
      std::ostringstream all;
      all << in.rdbuf();
      text = all.str();
    }
  }
  if (!mpi || mpi->world() == 1) {
    ST_CHECK(error.empty(), "{}", error);
    return text;
  }
  error = broadcast_string(*mpi, error);
  if (!error.empty()) throw RankAgreedError(error);
  return broadcast_string(*mpi, text);
}

}  // namespace

int run_train(const TrainArgs& a) {
  Config config;
  // Under mpirun (main's MpiSession): this process is one rank of a data-parallel run. Made
  // first, so a resume's config reaches every rank from the primary; its watchdog's timeout
  // follows the config once read.
  std::unique_ptr<dist::MpiCommunicator> mpi;
  if (dist::MpiSession::active()) mpi = std::make_unique<dist::MpiCommunicator>();
  std::string out = a.out;
  // A config that does not load fails alike on every rank: under mpirun the ranks agree on it,
  // so rank 0 says it once and every rank exits 2 (train/rank_start.h).
  std::string load_error;
  try {
    if (!a.resume.empty()) {
      ST_CHECK(!a.overwrite,
               "--resume {} continues that run from its checkpoint, and --overwrite would delete it and start again: "
               "give one of them",
               a.resume);
      ST_CHECK(a.out.empty() || fs::path(a.out).lexically_normal() == fs::path(a.resume).lexically_normal(),
               "--out {} and --resume {}: a resumed run stays in its directory; leave --out out", a.out, a.resume);
      out = a.resume;
      const std::string cfg = (fs::path(out) / "config.yaml").string();
      config = resume_config(a, cfg, run_config_text(cfg, out, mpi.get()));
    } else {
      ST_CHECK(!a.config.empty(), "train needs a config file: seqtrain train CONFIG.yaml (see examples/)");
      config = load_config(a.config, a.overrides);
      if (out.empty()) out = (fs::path("runs") / fs::path(a.config).stem()).string();
    }
  } catch (const RankAgreedError&) {
    throw;
  } catch (const Error& e) {
    if (!mpi || mpi->world() == 1) throw;
    load_error = e.what();
  }
  // Only the load's errors here: the configs themselves are compared in train(), after each
  // rank's own start-up errors (its data), which name the cause better than a differing hash.
  if (mpi && mpi->world() > 1) agree_to_start(*mpi, load_error, rank_identity(""));
  if (a.threads >= 0) config.runtime.threads = a.threads;
  if (a.profile >= 0) config.runtime.profile = a.profile;
  TrainOptions opt{out, !a.resume.empty(), a.overwrite, a.quiet};
  opt.stop = &signal_stop_token();  // SIGINT/SIGTERM (route_stop_signals in main)
  // A model in a GPU's memory sums on NCCL, bootstrapped over MPI (dist/device_communicator.h).
  std::unique_ptr<Communicator> device_comm;
  if (mpi) {
    mpi->set_timeout(config.runtime.collective_timeout_s);
    device_comm = dist::device_communicator(*mpi, backend_for(config.runtime.backend, config.runtime.device));
    opt.comm = device_comm ? device_comm.get() : mpi.get();
  }
  TrainSummary s = train(config, opt);
  // mpirun ends the whole job as soon as one rank exits non-zero (128 + signal after a stop):
  // no rank leaves before rank 0 has written its last checkpoint and summary.json.
  if (mpi) mpi->barrier();
  if (mpi && mpi->primary()) {
    const auto& st = mpi->stats();
    std::fprintf(stderr, "seqtrain: mpi: %d ranks; rank 0 spent %.3f s of %.3f s training in collectives (%.1f%%); "
                 "%ld gradient all-reduces, %.1f MB each\n", mpi->world(), st.seconds, s.time_s,
                 s.time_s > 0 ? 100.0 * st.seconds / s.time_s : 0.0, static_cast<long>(st.reductions),
                 st.reductions ? st.reduced_bytes / static_cast<double>(st.reductions) / 1e6 : 0.0);
    if (device_comm)
      std::fprintf(stderr, "seqtrain: mpi: the gradient sums ran on the GPUs (NCCL), not counted above\n");
    // The overlap (docs/DISTRIBUTED.md): how much of the gradient traffic the backward covered.
    if (st.buckets > 0)
      std::fprintf(stderr, "seqtrain: mpi: overlap: %ld gradient buckets, %ld (%.0f%%) exchanged before the step "
                   "waited for them; %.3f s waiting after the backward\n", static_cast<long>(st.buckets),
                   static_cast<long>(st.buckets_early), 100.0 * static_cast<double>(st.buckets_early) /
                   static_cast<double>(st.buckets), st.finish_seconds);
  }
  // Every rank ends the run at the same step; the summary is the primary's to print.
  if (mpi && !mpi->primary()) return s.stopped_by == "signal" ? 128 + (s.signal ? s.signal : SIGINT) : 0;
  // The summary's lines, as summary.json holds them (train/summary_json.h).
  std::printf("run: %s\n", out.c_str());
  for (const auto& [key, value] : summary_lines(s)) std::printf("%s: %s\n", key.c_str(), value.c_str());
  // Interrupted: the shell convention 128 + signal (130 for Ctrl-C, 143 for SIGTERM).
  return s.stopped_by == "signal" ? 128 + (s.signal ? s.signal : SIGINT) : 0;
}

// "checkpoint: DIR (tag, epoch, step)": which weights a score is of.
void print_checkpoint(const CheckpointRef& ck) {
  std::printf("checkpoint: %s (%s, epoch %ld, step %ld)\n", ck.dir.c_str(),
              ck.state.value("tag", std::string("?")).c_str(), (long)ck.state.value("epoch", int64_t{0}),
              (long)ck.state.value("updates", int64_t{0}));
}

// What a loss is measured in, for eval's labels.
std::string loss_units(const Config& config, bool windowed_run) {
  if (config.train.loss == "cross_entropy") return "cross-entropy in nats, the training loss";
  if (windowed_run && config.data.normalize == "zscore")
    return fmt::format("{} in normalized units (each target z-scored with the training split's statistics), the "
                       "training loss", config.train.loss);
  return fmt::format("{} in the targets' units, the training loss", config.train.loss);
}

// eval's forecast lines: the model's errors in the targets' units, then each baseline's on the
// same windows, then each target's when there are several.
void print_forecast_report(const nlohmann::json& r, const ForecastScoring& s, const std::string& scale_rows) {
  auto num = [](const nlohmann::json& j, const char* k) {
    return j.contains(k) && j[k].is_number() ? j[k].get<double>() : std::nan("");
  };
  std::string targets;
  for (const auto& t : s.targets) targets += (targets.empty() ? "" : ", ") + t;
  const std::string naive = s.mase_lag > 1 ? fmt::format("lag-{} (seasonal) naive", s.mase_lag) : "one-step naive";
  std::printf("mae: %.6f (in the units of %s; over every target and horizon step)\nrmse: %.6f (same units)\n"
              "mape: %.4f (percent; actual values of 0 skipped)\nsmape: %.4f (percent)\n",
              num(r, "mae"), targets.c_str(), num(r, "rmse"), num(r, "mape"), num(r, "smape"));
  if (s.mase_scale.empty())
    std::printf("mase: n/a (%s)\n", s.baselines() ? "new data without the training split to scale by"
                                                  : "set data.npy.target_features to each target's X feature");
  else
    std::printf("mase: %.6f (each target's MAE over its %s MAE on the %s, averaged over targets)\n", num(r, "mase"),
                naive.c_str(), scale_rows.c_str());
  if (r.contains("pinball"))
    std::printf("pinball: %.6f (mean quantile loss over the levels, in the targets' units)\ncoverage: %.4f (share of "
                "actual values inside the %g-%g interval)\n",
                num(r, "pinball"), num(r, "coverage"), r["interval"][0].get<double>(), r["interval"][1].get<double>());
  if (r.contains("baseline"))
    for (const auto& [name, b] : r["baseline"].items())
      std::printf("baseline_%s_mae: %.6f\nbaseline_%s_rmse: %.6f\nbaseline_%s_mape: %.4f\nbaseline_%s_smape: %.4f\n"
                  "baseline_%s_mase: %.6f\n",
                  name.c_str(), num(b, "mae"), name.c_str(), num(b, "rmse"), name.c_str(), num(b, "mape"),
                  name.c_str(), num(b, "smape"), name.c_str(), num(b, "mase"));
  if (r.contains("per_target"))
    for (const std::string& name : s.targets) {  // in the config's order
      const nlohmann::json& m = r["per_target"][name];
      std::printf("%s: mae %.6f, rmse %.6f, mape %.4f, smape %.4f, mase %.6f\n", name.c_str(), num(m, "mae"),
                  num(m, "rmse"), num(m, "mape"), num(m, "smape"), num(m, "mase"));
    }
}

// eval's per-series lines of a fleet: each series' errors beside its last-value baseline's.
void print_series_report(const nlohmann::json& per_series) {
  auto num = [](const nlohmann::json& j, const char* k) {
    return j.contains(k) && j[k].is_number() ? j[k].get<double>() : std::nan("");
  };
  for (const auto& [id, m] : per_series.items()) {
    std::string line = fmt::format("series {}: mae {:.6f}, rmse {:.6f}, smape {:.4f}, mase {:.6f}", id, num(m, "mae"),
                                   num(m, "rmse"), num(m, "smape"), num(m, "mase"));
    if (m.contains("coverage")) line += fmt::format(", coverage {:.4f}", num(m, "coverage"));
    if (m.contains("baseline"))
      for (const auto& [name, b] : m["baseline"].items()) line += fmt::format(", {} mae {:.6f}", name, num(b, "mae"));
    std::printf("%s\n", line.c_str());
  }
}

// An npy regression run's scoring (y [H] or [H, targets] per sample, in its own units); none for
// classifiers and language models. The baselines need data.npy.target_features and X's
// statistics (state.json's normalizer); MASE also the training split (`train`, when the plan
// was rebuilt).
std::optional<ForecastScoring> npy_scoring(const Config& config, int64_t steps, int64_t features, int64_t classes,
                                           int64_t vocab, const std::vector<int64_t>& y_shape,
                                           const Normalizer& x_stats, const BatchSource* train) {
  if (classes > 0 || vocab > 0 || y_shape.empty()) return std::nullopt;
  return ForecastScoring::of_npy(steps, features, y_shape[0], y_shape.size() > 1 ? y_shape[1] : 1,
                                 forecast_quantiles(config.train), config.data.npy.target_features, &x_stats, train);
}

// Labels must be whole numbers of a class the model has; the file is named when one is not.
void check_labels(const NpyArray& y, int64_t classes) {
  std::vector<float> v(static_cast<size_t>(y.count));
  y.read_floats(0, y.count, v.data());
  for (int64_t i = 0; i < y.count; ++i)
    ST_CHECK(v[i] == std::floor(v[i]) && v[i] >= 0 && v[i] < static_cast<float>(classes),
             "--labels {}: label {} at y[{}] is not a class of this model (0 to {}); fix the labels", y.path, v[i], i,
             classes - 1);
}

// eval of an npy run on a new labelled pair (--input X.npy --labels y.npy): scaled with the
// statistics in state.json, so the training files are not needed.
int eval_npy_input(const CheckpointRef& ck, const EvalArgs& a) {
  const Config& config = ck.config;
  ST_CHECK(!a.labels.empty(),
           "--input {} on an npy run needs --labels y.npy (its labels [N] or targets): eval scores predictions against "
           "them; `seqtrain predict` writes predictions without labels",
           a.input);
  const nlohmann::json& io = ck.state.at("io");
  const int64_t steps = io.at("steps"), features = io.at("features"), outputs = io.at("outputs");
  const int64_t classes = io.at("classes");
  auto src = std::make_shared<NpySource>(NpySource::open(a.input, a.labels));
  ST_CHECK(src->steps() == steps && src->features() == features,
           "--input {}: samples of {} steps x {} features, but the run was trained on {} x {} (X of shape [N, {}, {}])",
           a.input, src->steps(), src->features(), steps, features, steps, features);
  const int64_t y_size = src->y_size();
  ST_CHECK(classes > 0 ? y_size == 1 : y_size == outputs,
           "--labels {}: {} values per sample, but this run's y has {} ({})", a.labels, y_size, classes > 0 ? 1 : outputs,
           classes > 0 ? "one class label per sample, shape [N]" : "targets of shape [N, ...] as in training");
  if (classes > 0) check_labels(*src->y(), classes);
  attach_lengths(*src, config, a.lengths, a.input);
  ZscoreSource input(src, Normalizer::from_json(ck.state.at("normalizer")), features);
  std::unique_ptr<Model> model = load_model(ck.dir, {.shape = DataShape{features, steps, outputs, 0, classes}}).model;
  const auto objective = make_objective(config.train, classes, y_size);
  double accuracy = 0;
  const auto scoring = npy_scoring(config, steps, features, classes, 0, io.value("y_shape", std::vector<int64_t>{}),
                                     Normalizer::from_json(ck.state.at("normalizer")), nullptr);
  std::optional<ForecastScorer> scorer;
  if (scoring) scorer.emplace(*scoring);
  const double loss = evaluate(*model, input, sample_layout(steps, features, false, classes > 0, y_size), *objective,
                               config.train.batch_size, &accuracy, scorer_hook(scorer));
  print_checkpoint(ck);
  std::printf("input: %s with labels %s\nsamples: %ld\nloss: %.6f (%s)\n", a.input.c_str(), a.labels.c_str(),
              (long)input.size(), loss, loss_units(config, false).c_str());
  if (classes > 0) std::printf("accuracy: %.6f\n", accuracy);
  if (scorer) print_forecast_report(scorer->report(), *scoring, "");
  return 0;
}

// eval of an npy or text run: its test (or validation) split read through the same data plan
// the trainer used, so the loss (and accuracy) are those of the run's test record. The plan is rebuilt
// from the source files, so files that changed since training are refused, not silently used.
int eval_planned_run(const CheckpointRef& ck, const EvalArgs& a) {
  const Config& config = ck.config;
  const bool text = is_text(config.data);
  ST_CHECK(a.labels.empty() || !a.input.empty(), "--labels {} belongs to an --input X .npy: give both", a.labels);
  if (!a.input.empty()) {
    ST_CHECK(!text,
             "--input {}: this run is a language model over data.path ({}); eval scores its own splits: leave "
             "--input out (--split val for the validation split), or train a run on the new text",
             a.input, config.data.path);
    return eval_npy_input(ck, a);
  }
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
  if (text)
    ST_CHECK(split != nullptr,
             "nothing to evaluate: this text run has no {} split (data.split gives it no share of {}); train with a "
             "{} share in data.split{}",
             a.split, config.data.path, a.split, val ? "" : ", or score the validation split with --split val");
  else
    ST_CHECK(split != nullptr,
             "nothing to evaluate: this npy run has no {} split (set data.npy.{}_x/{}_y){}, or give new data with "
             "--input X.npy --labels y.npy",
             a.split, a.split, a.split, val ? "" : "; --split val scores the validation split");
  const DataShape shape{plan.features, plan.steps, plan.outputs, plan.vocab, plan.classes};
  std::unique_ptr<Model> model = load_model(ck.dir, {.shape = shape}).model;
  double accuracy = 0;
  const auto objective = make_objective(config, plan);
  const auto scoring = npy_scoring(config, plan.steps, plan.features, plan.classes, plan.vocab, plan.y_shape,
                                     Normalizer::from_json(plan.normalizer), plan.train.get());
  std::optional<ForecastScorer> scorer;
  if (scoring) scorer.emplace(*scoring);
  const double loss = evaluate(*model, *split, sample_layout(plan, MaskDraw::per_sample), *objective, config.train.batch_size, &accuracy,
                               scorer_hook(scorer));
  print_checkpoint(ck);
  // The training log's val records score only the first train.eval_iters batches when it is set.
  const int64_t capped = config.train.eval_iters * config.train.batch_size;
  const std::string how =
      val && config.train.eval_iters > 0 && capped < split->size()
          ? fmt::format("every {} of the split; the training log's val records score its first {} (train.eval_iters "
                        "{} x train.batch_size {}), so they differ",
                        plan.unit, capped, config.train.eval_iters, config.train.batch_size)
          : fmt::format("every {} of the split, as the training log's {} records", plan.unit, a.split);
  std::printf("split: %s (%s)\n%s: %ld\nloss: %.6f (%s)\n", a.split.c_str(), how.c_str(), plan.unit,
              (long)split->size(), loss, loss_units(config, false).c_str());
  if (objective->has_accuracy()) std::printf("accuracy: %.6f\n", accuracy);
  if (plan.vocab > 0) std::printf("perplexity: %.6f (exp of the loss)\n", std::exp(loss));
  if (scorer) print_forecast_report(scorer->report(), *scoring, "");
  return 0;
}

int run_eval(const EvalArgs& a) {
  ST_CHECK(a.input.empty() || a.split == "test",
           "--split {} picks a split of the run, --input evaluates new labelled data: give one of them", a.split);
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  if (!windowed(ck.config)) return eval_planned_run(ck, a);
  ST_CHECK(a.labels.empty(),
           "--labels {}: a {} run's CSV holds its targets as columns; give the CSV as --input and leave --labels out",
           a.labels, ck.config.data.source);
  if (!a.input.empty()) check_input_format(a.input, ".csv", "a CSV with the run's columns");
  Loaded l = load_for_inference(ck, a.input);
  const WindowDataset& split = !a.input.empty() ? l.data.train : a.split == "val" ? l.data.val : l.data.test;
  ST_CHECK(!split.empty(), "nothing to evaluate: the {} split has no window (pass --input CSV{})", a.split,
           a.split == "test" ? ", or --split val" : "");
  // The loss, and the errors in the data's original units beside the baselines' on the same windows.
  const ForecastScoring scoring = ForecastScoring::of(l.data, l.config.data.seasons, forecast_quantiles(l.config.train));
  ForecastScorer scorer(scoring, series_of(&split));
  const auto objective = make_objective(l.config.train, 0, split.y_size());
  const double loss = evaluate(*l.model, WindowSource(split), window_layout(split), *objective,
                               l.config.train.batch_size, nullptr,
                               [&](int64_t n, const float* x, const float* y, const float* p) { scorer.add(n, x, y, p); });
  print_checkpoint(ck);
  if (a.input.empty())
    std::printf("split: %s (every window of the split, as the training log's %s records)\n", a.split.c_str(),
                a.split.c_str());
  else
    std::printf("input: %s (every window of its rows, scaled with the run's statistics)\n", a.input.c_str());
  std::printf("windows: %ld\nloss: %.6f (%s)\n", (long)split.size(), loss, loss_units(l.config, true).c_str());
  if (l.data.fleet) std::printf("series: %ld\n", (long)l.data.series.size());
  const nlohmann::json report = scorer.report(l.data.fleet);
  print_forecast_report(report, scoring, a.input.empty() ? "training split" : "input's rows");
  if (report.contains("per_series")) print_series_report(report["per_series"]);
  return 0;
}

using OutputFiles = std::vector<std::pair<std::string, std::string>>;  // (path, bytes)

// A classifier's predict files from its logits [N, classes]: the predicted label (the largest
// logit, the lower class on a tie) and the softmax probabilities beside them, as one CSV or as
// OUT.npy (logits), OUT.probs.npy and OUT.labels.npy.
OutputFiles classifier_files(const std::vector<float>& logits, int64_t N, int64_t classes, const std::string& output) {
  std::vector<float> probs(logits.size());
  std::vector<int64_t> label(N);
  for (int64_t i = 0; i < N; ++i) {
    const float* z = logits.data() + i * classes;
    float* q = probs.data() + i * classes;
    label[i] = std::max_element(z, z + classes) - z;
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += q[c] = static_cast<float>(std::exp(double(z[c]) - z[label[i]]));
    for (int64_t c = 0; c < classes; ++c) q[c] = static_cast<float>(q[c] / sum);
  }
  if (ends_with_text(output, ".csv")) {
    std::string text = "label";
    for (const char* col : {"prob_", "logit_"})
      for (int64_t c = 0; c < classes; ++c) text += fmt::format(",{}{}", col, c);
    text += "\n";
    for (int64_t i = 0; i < N; ++i) {
      text += std::to_string(label[i]);
      for (const float* v : {static_cast<const float*>(probs.data()), logits.data()})
        for (int64_t c = 0; c < classes; ++c) text += fmt::format(",{:.7g}", v[i * classes + c]);
      text += "\n";
    }
    return {{output, std::move(text)}};
  }
  const std::string stem = output.substr(0, output.size() - 4);
  return {{output, npy_bytes_f32({N, classes}, logits.data(), output)},
          {stem + ".probs.npy", npy_bytes_f32({N, classes}, probs.data(), stem + ".probs.npy")},
          {stem + ".labels.npy", npy_bytes_i64({N}, label.data(), stem + ".labels.npy")}};
}

// A regression's predict file from its outputs [N, outputs]: a CSV of y_<j> columns, or a .npy
// of shape [N, *y_shape].
// With quantile levels (train.loss quantile) they are the innermost axis: .npy [N, *y_shape,
// levels], .csv columns y_<j>_q<level>.
OutputFiles regression_files(const std::vector<float>& out, int64_t N, int64_t outputs,
                             const std::vector<int64_t>& y_shape, const std::vector<double>& quantiles,
                             const std::string& output) {
  if (!ends_with_text(output, ".csv")) {
    std::vector<int64_t> shape{N};
    shape.insert(shape.end(), y_shape.begin(), y_shape.end());
    if (!quantiles.empty()) shape.push_back(static_cast<int64_t>(quantiles.size()));
    return {{output, npy_bytes_f32(shape, out.data(), output)}};
  }
  const int64_t Q = quantiles.empty() ? 1 : static_cast<int64_t>(quantiles.size());
  std::string text;
  for (int64_t j = 0; j < outputs; ++j)
    text += fmt::format("{}y_{}{}", j ? "," : "", j / Q, level_suffix(quantiles, j % Q));
  text += "\n";
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < outputs; ++j) text += fmt::format("{}{:.7g}", j ? "," : "", out[i * outputs + j]);
    text += "\n";
  }
  return {{output, std::move(text)}};
}

// predict of an npy run: the model's outputs for every sample of an X .npy. Regression: [N, *y's
// per-sample shape] in y's units (npy targets are not normalized). Classification: the logits,
// the softmax probabilities and the predicted label (the largest logit; ties to the lower
// class): .npy writes OUT (logits [N, classes], as before), OUT's stem + .probs.npy and
// .labels.npy (int64); .csv writes one row per sample: label, prob_<c>..., logit_<c>.... The input
// is z-scored with the statistics in state.json, so the training files are not needed. Every
// file is made in memory first, so a refusal writes nothing.
int predict_npy(const CheckpointRef& ck, const PredictArgs& a) {
  const Config& config = ck.config;
  ST_CHECK(ends_with_text(a.output, ".csv") || ends_with_text(a.output, ".npy"),
           "--output {}: an npy run's predictions are written as .npy arrays or a .csv; give a path ending in one",
           a.output);
  ST_CHECK(ck.state.contains("io"),
           "{}/state.json has no \"io\" section (the model's input and output shapes, recorded since predict "
           "learned npy runs): checkpoints written by this seqtrain have it; train the run again to predict with it",
           ck.dir);
  check_input_format(a.input, ".npy", "an X .npy array [N, T, F] like data.npy.train_x");
  const nlohmann::json& io = ck.state.at("io");
  const int64_t steps = io.at("steps"), features = io.at("features"), outputs = io.at("outputs");
  const int64_t classes = io.at("classes");
  const std::vector<int64_t> y_shape = io.at("y_shape");
  auto x = std::make_shared<NpySource>(NpySource::open(a.input));
  ST_CHECK(x->steps() == steps && x->features() == features,
           "--input {}: samples of {} steps x {} features, but the run was trained on {} x {} (X of shape [N, {}, {}])",
           a.input, x->steps(), x->features(), steps, features, steps, features);
  const int64_t N = x->size();
  attach_lengths(*x, config, a.lengths, a.input);
  ZscoreSource input(x, Normalizer::from_json(ck.state.at("normalizer")), features);
  std::unique_ptr<Model> model = load_model(ck.dir, {.shape = DataShape{features, steps, outputs, 0, classes}}).model;
  std::vector<float> out(N * outputs);
  forward_batches(*model, input, sample_layout(steps, features, false, false, outputs), config.train.batch_size,
                  [&](int64_t first, const Batch& host, const Batch&, const Tensor& pred, Arena&) {
                    const int64_t n = host.count;
                    ST_CHECK(pred.numel() == n * outputs, "predict: the model gave {} outputs for {} samples of {}",
                             pred.numel(), n, outputs);
                    read_floats(model->params().backend(), pred, out.data() + first * outputs);
                  });
  const std::vector<std::pair<std::string, std::string>> files =
      classes > 0 ? classifier_files(out, N, classes, a.output)
                  : regression_files(out, N, outputs, y_shape, forecast_quantiles(config.train),
                                     a.output);  // (path, bytes), made before any is written
  std::string names;
  for (const auto& [path, bytes] : files) {
    write_file_atomic(path, bytes);
    names += (names.empty() ? "" : ", ") + path;
  }
  std::printf("wrote %s for %ld samples to %s\n",
              classes > 0 ? "predicted labels, probabilities and logits" : "predictions", (long)N, names.c_str());
  return 0;
}

int run_predict(const PredictArgs& a) {
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  if (is_arrays(ck.config.data)) return predict_npy(ck, a);
  ST_CHECK(windowed(ck.config),
           "predict writes forecasts for the windows of a CSV or the samples of an X .npy, but this run reads "
           "data.source '{}': use `seqtrain eval` for its test split, and `seqtrain generate` to sample text",
           ck.config.data.source);
  check_input_format(a.input, ".csv", "a CSV with the run's columns");
  Loaded l = load_for_inference(ck, a.input);
  const WindowDataset& split = l.data.train;
  // With data.time_column each row starts with the time of the window's last observed row (the
  // forecast's origin); step h is then h steps after it.
  // A fleet's rows start with their series' id.
  const Series& table = *l.data.table;
  const bool timed = !table.times.empty(), fleet = l.data.fleet;
  const std::vector<double> quantiles = forecast_quantiles(l.config.train);
  const int64_t levels = quantile_levels(l.config.train), outputs = split.y_size() * levels;
  std::string csv = fleet ? series_column_of(ck.config.data) : "";
  if (timed) csv += (csv.empty() ? "" : ",") + l.config.data.time_column;
  for (int64_t h = 0; h < split.horizon(); ++h)
    for (const auto& t : l.data.targets)
      for (int64_t q = 0; q < levels; ++q)
        csv += (csv.empty() ? "" : ",") + t + "_t+" + std::to_string(h + 1) + level_suffix(quantiles, q);
  csv += "\n";
  // --plot: the last window of each series shown (its latest forecast against what followed).
  ST_CHECK(a.plot.empty() || ends_with_text(a.plot, ".svg"), "--plot {}: the plot is an SVG; give a path ending in .svg",
           a.plot);
  ST_CHECK(a.series.empty() || !a.plot.empty(), "--series {} picks the series --plot draws: give --plot FILE.svg too",
           a.series);
  const std::vector<int64_t> shown = a.plot.empty() ? std::vector<int64_t>{} : plotted_series(l.data, a.series);
  std::vector<std::vector<float>> last(l.data.series.size());  // per series: its last window's outputs
  int64_t window = 0;
  forecast_windows(l, split, [&](int64_t n, const float* p) {
    for (int64_t i = 0; i < n; ++i, ++window) {
      if (!shown.empty()) {
        const int64_t k = split.series_of(window);
        if (window + 1 == split.windows_of(k).second) last[k].assign(p + i * outputs, p + (i + 1) * outputs);
      }
      if (fleet) csv += csv_cell(l.data.series[split.series_of(window)].id) + ",";
      if (timed)
        csv += format_timestamp(table.times[split.window_start(window) + split.lookback() - 1], table.time_kind) + ",";
      for (int64_t j = 0; j < outputs; ++j) csv += fmt::format("{}{:.7g}", j ? "," : "", p[i * outputs + j]);
      csv += "\n";
    }
  });
  std::string svg;
  if (!shown.empty()) {
    const int64_t H = split.horizon(), T = l.data.n_targets();
    std::vector<PlotPanel> panels;
    for (int64_t k : shown)
      for (int64_t t = 0; t < T; ++t) {
        DrawnForecast f{split.window_start(split.windows_of(k).second - 1) + split.lookback(), -1, {}, {}};
        for (int64_t h = 0; h < H; ++h) {
          const float* lv = last[k].data() + (h * T + t) * levels;
          f.point.push_back(lv[point_level(quantiles)]);
          if (levels > 1) f.levels.insert(f.levels.end(), lv, lv + levels);
        }
        panels.push_back(forecast_panel(l.data, ck.config.data, k, t, {f}, quantiles, 3 * split.lookback(), a.units));
      }
    svg = forecast_svg(panels, plot_options(l.data, fmt::format("{}: the last forecast of {}", a.checkpoint,
                                                                fs::path(a.input).filename().string())));
  }
  write_file_atomic(a.output, csv);
  if (!svg.empty()) write_file_atomic(a.plot, svg);
  std::printf("wrote %ld forecasts to %s%s\n", (long)split.size(), a.output.c_str(),
              svg.empty() ? "" : (" and the plot to " + a.plot).c_str());
  return 0;
}

}  // namespace seqtrain
