// `seqtrain forecast`: the H steps after the end of a history, which `predict` cannot give (it
// scores windows whose future is already in the file). Only the history's last lookback rows are
// read into the model, scaled with the run's statistics; the forecast is in the targets' units.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <filesystem>

#include "backend/device_batch.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "config/suggest.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/fleet.h"
#include "data/normalizer.h"
#include "io/atomic_dir.h"
#include "train/load_model.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

// The known future's raw columns (data.future_features that are data columns, not season or
// calendar phases, which are computed for the future rows like for the history's).
std::vector<std::string> raw_future_columns(const DataConfig& d) {
  const std::vector<std::string> derived = time_feature_names(d);
  std::vector<std::string> out;
  for (const std::string& f : d.future_features)
    if (std::find(derived.begin(), derived.end(), f) == derived.end()) out.push_back(f);
  return out;
}

// The history's rows, then (with data.future_features) H rows from --future: its raw future
// columns and times, every other column NaN (never read: x holds 0 there).
Series history_and_future(const ForecastArgs& a, const DataConfig& d, int64_t H) {
  Series s = load_series(d);  // the run's features, then targets not among them
  if (d.future_features.empty()) {
    ST_CHECK(a.future.empty(), "--future {}: this run has no known-future inputs (data.future_features is empty); "
             "leave --future out", a.future);
    return s;
  }
  ST_CHECK(!a.future.empty(),
           "this run reads known-future inputs ({}) for the {} steps it forecasts: give them with --future F.csv, "
           "one row per step{}", quoted_list(d.future_features), H,
           d.time_column.empty() ? "" : " with its " + d.time_column + " column");
  check_input_format(a.future, ".csv", "a CSV of the known-future inputs");
  const std::vector<std::string> raw = raw_future_columns(d);
  const Series f = read_csv(a.future, raw, "error", d.time_column);
  ST_CHECK(f.rows >= H, "--future {}: {} rows, but the model forecasts {} steps (data.horizon) and needs the known "
           "inputs of each; give {} rows", a.future, f.rows, H, H);
  ST_CHECK(s.times.empty() || f.times.front() > s.times.back(),
           "--future {}: its first time {} is not after the history's last ({}); the future starts after the history",
           a.future, format_timestamp(f.times.front(), f.time_kind), format_timestamp(s.times.back(), s.time_kind));
  const int64_t cols = s.cols();
  s.values.resize(static_cast<size_t>((s.rows + H) * cols), std::numeric_limits<float>::quiet_NaN());
  for (int64_t h = 0; h < H; ++h) {
    for (size_t c = 0; c < raw.size(); ++c) s.at(s.rows + h, s.column_index(raw[c])) = f.at(h, static_cast<int64_t>(c));
    if (!s.times.empty()) s.times.push_back(f.times[h]);
  }
  s.rows += H;
  if (s.segments.size() == 1) s.segments[0].end = s.rows;  // one series' history: the future is its rows too
  return s;
}

}  // namespace

int run_forecast(const ForecastArgs& a) {
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  ST_CHECK(windowed(ck.config),
           "forecast continues a series from a CSV history, but this run reads data.source '{}': use `seqtrain "
           "predict` for its samples, `seqtrain generate` for text",
           ck.config.data.source);
  check_input_format(a.input, ".csv", "a CSV history with the run's columns");
  Config config = ck.config;
  config.data = input_data(ck.config.data, a.input);
  const int64_t L = config.data.lookback, H = config.data.horizon;
  const int64_t Hf = config.data.future_features.empty() ? 0 : H;  // the known future's rows
  Series history = history_and_future(a, config.data, H);
  ST_CHECK(history.segments.size() <= 1,
           "--input {}: the history holds {} series ({}, ...), but forecast continues one: give one series' rows (its "
           "id in the '{}' column, or one file of the fleet)", a.input, history.segments.size(),
           history.segments.empty() ? "" : history.segments[0].id, series_column_of(ck.config.data));
  add_time_features(history, config.data, nullptr);
  const int64_t rows = history.rows - Hf;  // the history's own rows
  ST_CHECK(rows >= L,
           "--input {}: the history has {} rows, but the model reads the last {} (data.lookback) to forecast; give "
           "at least {} rows",
           a.input, rows, L, L);
  const Normalizer norm = Normalizer::from_json(ck.state.at("normalizer"));
  norm.apply(history);
  const std::vector<std::string> features = ck.state.at("features"), targets = ck.state.at("targets");
  const int64_t F = static_cast<int64_t>(features.size()), T = static_cast<int64_t>(targets.size());
  std::vector<float> x((L + Hf) * F, 0.f);
  for (int64_t f = 0; f < F; ++f) {
    const int64_t col = history.column_index(features[f]);
    const bool known = std::find(config.data.future_features.begin(), config.data.future_features.end(),
                                 features[f]) != config.data.future_features.end();
    for (int64_t r = 0; r < L + (known ? Hf : 0); ++r) x[r * F + f] = history.at(rows - L + r, col);
  }
  const std::vector<double> quantiles = forecast_quantiles(config.train);
  const int64_t Q = quantile_levels(config.train);
  std::unique_ptr<Model> model =
      load_model(ck.dir, {.shape = DataShape{.features = F, .steps = L + Hf, .outputs = H * T * Q, .future_steps = Hf}})
          .model;
  Backend& backend = model->params().backend();
  Arena arena(backend);
  StepContext ctx(arena);
  const Batch batch = device_batch(batch_of(Tensor(x.data(), {1, L + Hf, F})), arena, backend);
  std::vector<float> p(H * T * Q);
  read_floats(backend, model->forward(batch, ctx), p.data());
  norm.invert_rows(targets, p.data(), H, Q);  // [H, T, Q] back to the targets' units
  // The future steps' times (data.time_column: the last time plus whole steps of the history's
  // spacing), else `step`, which continues the history's row numbering (its rows are 0 .. N-1).
  const bool timed = !history.times.empty();
  const std::vector<int64_t> past_times(history.times.begin(), history.times.begin() + (timed ? rows : 0));
  const int64_t spacing = timed ? time_step(past_times) : 1;
  std::string csv = timed ? config.data.time_column : "step";
  for (const auto& t : targets)
    for (int64_t q = 0; q < Q; ++q) csv += "," + t + level_suffix(quantiles, q);
  csv += "\n";
  for (int64_t h = 0; h < H; ++h) {
    // With --future its times are the steps' (they may be irregular); else whole steps ahead.
    csv += timed ? format_timestamp(Hf ? history.times[rows + h] : past_times.back() + (h + 1) * spacing,
                                    history.time_kind)
                 : std::to_string(rows + h);
    for (int64_t j = 0; j < T * Q; ++j) csv += fmt::format(",{:.7g}", p[h * T * Q + j]);
    csv += "\n";
  }
  if (a.output.empty()) {
    std::fwrite(csv.data(), 1, csv.size(), stdout);
    return 0;
  }
  write_file_atomic(a.output, csv);
  std::printf("wrote the %ld steps after row %ld of %s to %s\n", (long)H, (long)rows - 1, a.input.c_str(),
              a.output.c_str());
  return 0;
}

}  // namespace seqtrain
