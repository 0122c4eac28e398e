// `seqtrain forecast`: the H steps after the end of a history, which `predict` cannot give (it
// scores windows whose future is already in the file). Only the history's last lookback rows are
// read into the model, scaled with the run's statistics; the forecast is in the targets' units.
#include <cstdio>
#include <filesystem>

#include "backend/device_batch.h"
#include "cli/commands.h"
#include "cli/inputs.h"
#include "data/dataset.h"
#include "data/normalizer.h"
#include "io/atomic_dir.h"
#include "train/load_model.h"

namespace seqtrain {
namespace fs = std::filesystem;

int run_forecast(const ForecastArgs& a) {
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  ST_CHECK(windowed(ck.config),
           "forecast continues a series from a CSV history, but this run reads data.source '{}': use `seqtrain "
           "predict` for its samples, `seqtrain generate` for text",
           ck.config.data.source);
  check_input_format(a.input, ".csv", "a CSV history with the run's columns");
  Config config = ck.config;
  config.data.source = "csv";
  config.data.path = fs::absolute(a.input).string();
  Series history = load_series(config.data);  // the run's features, then targets not among them
  add_time_features(history, config.data, nullptr);
  const int64_t L = config.data.lookback, H = config.data.horizon;
  ST_CHECK(history.rows >= L,
           "--input {}: the history has {} rows, but the model reads the last {} (data.lookback) to forecast; give "
           "at least {} rows",
           a.input, history.rows, L, L);
  const Normalizer norm = Normalizer::from_json(ck.state.at("normalizer"));
  norm.apply(history);
  const std::vector<std::string> features = ck.state.at("features"), targets = ck.state.at("targets");
  const int64_t F = static_cast<int64_t>(features.size()), T = static_cast<int64_t>(targets.size());
  std::vector<float> x(L * F);
  for (int64_t f = 0; f < F; ++f) {
    const int64_t col = history.column_index(features[f]);
    for (int64_t r = 0; r < L; ++r) x[r * F + f] = history.at(history.rows - L + r, col);
  }
  const std::vector<double> quantiles = forecast_quantiles(config.train);
  const int64_t Q = quantile_levels(config.train);
  std::unique_ptr<Model> model = load_model(ck.dir, {.shape = DataShape{F, L, H * T * Q}}).model;
  Backend& backend = model->params().backend();
  Arena arena(backend);
  StepContext ctx(arena);
  const Batch batch = device_batch(batch_of(Tensor(x.data(), {1, L, F})), arena, backend);
  std::vector<float> p(H * T * Q);
  read_floats(backend, model->forward(batch, ctx), p.data());
  for (int64_t t = 0; t < T; ++t)  // [H, T, Q]: each target's levels back to its units
    for (int64_t q = 0; q < Q; ++q) norm.invert(norm.index_of(targets[t]), p.data() + t * Q + q, H, T * Q);
  // The future steps' times (data.time_column: the last time plus whole steps of the history's
  // spacing), else `step`, which continues the history's row numbering (its rows are 0 .. N-1).
  const bool timed = !history.times.empty();
  const int64_t spacing = timed ? time_step(history.times) : 1;
  std::string csv = timed ? config.data.time_column : "step";
  for (const auto& t : targets)
    for (int64_t q = 0; q < Q; ++q) csv += "," + t + (quantiles.empty() ? "" : fmt::format("_q{}", quantiles[q]));
  csv += "\n";
  for (int64_t h = 0; h < H; ++h) {
    csv += timed ? format_timestamp(history.times.back() + (h + 1) * spacing, history.time_kind)
                 : std::to_string(history.rows + h);
    for (int64_t j = 0; j < T * Q; ++j) csv += fmt::format(",{:.7g}", p[h * T * Q + j]);
    csv += "\n";
  }
  if (a.output.empty()) {
    std::fwrite(csv.data(), 1, csv.size(), stdout);
    return 0;
  }
  write_file_atomic(a.output, csv);
  std::printf("wrote the %ld steps after row %ld of %s to %s\n", (long)H, (long)history.rows - 1, a.input.c_str(),
              a.output.c_str());
  return 0;
}

}  // namespace seqtrain
