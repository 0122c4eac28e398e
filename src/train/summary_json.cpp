// The end-of-run summary. See summary_json.h.
#include "train/summary_json.h"

#include <cmath>
#include <fmt/format.h>

#include "core/build_info.h"

namespace seqtrain {

namespace {
// One figure of the summary: its value in the file (null when the run lacks it), and how the
// console shows it.
struct Field {
  std::string key;
  nlohmann::ordered_json value;
  int decimals = 6;          // a fractional number's digits on the console
  bool printed = true;       // false: in summary.json only
  std::string absent = {};   // the console's text for a null value; empty: the line is left out
};

std::vector<Field> fields(const TrainSummary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(); };
  const BuildInfo& b = build_info();
  std::vector<Field> f{
      {"stopped_by", s.stopped_by},
      {"epochs", s.epochs},
      {"steps", s.steps},
      {"best_val_loss", std::isfinite(s.best_val) ? nlohmann::ordered_json(s.best_val) : nlohmann::ordered_json(), 6,
       true, "none yet"},
      {"test_loss", opt(s.test_loss)},
      {"test_accuracy", opt(s.test_accuracy)},
      {"baseline_last_value_val_mse", opt(s.baseline_val)},
      {"skipped_steps", s.skipped_steps, 6, s.skipped_steps > 0},
      {"time_s", s.time_s, 2},
      {"checkpoint_block_s", s.checkpoint_block_s, 4},
      {"seqtrain", fmt::format("{} ({})", b.version, b.commit), 6, false}};
  if (s.stopped_by == "signal") f.push_back({"signal", s.signal, 6, false});
  if (s.monitor != "val_loss") {  // after best_val_loss: what the best checkpoint was chosen by
    auto at = f.begin() + 4;
    at = f.insert(at, {"monitor", s.monitor});
    f.insert(at + 1, {"best_" + s.monitor, opt(s.best_monitored), 6, true, "none yet"});
  }
  // A forecasting run's test errors in the targets' units, beside the baselines' on the same windows.
  const nlohmann::json& t = s.test_forecast;
  auto num = [](const nlohmann::json& j, const char* k) {
    return j.is_object() && j.contains(k) && j[k].is_number() ? nlohmann::ordered_json(j[k].get<double>())
                                                              : nlohmann::ordered_json();
  };
  if (t.is_object()) {
    for (const char* k : {"mae", "rmse", "mase"}) f.push_back({fmt::format("test_{}", k), num(t, k)});
    if (t.contains("pinball"))
      for (const char* k : {"pinball", "coverage"}) f.push_back({fmt::format("test_{}", k), num(t, k)});
    if (t.contains("baseline"))
      for (const auto& [name, b] : t["baseline"].items())
        for (const char* k : {"mae", "mase"}) f.push_back({fmt::format("baseline_{}_test_{}", name, k), num(b, k)});
  }
  return f;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> summary_lines(const TrainSummary& s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Field& f : fields(s)) {
    if (!f.printed || (f.value.is_null() && f.absent.empty())) continue;
    if (f.value.is_null()) out.emplace_back(f.key, f.absent);
    else if (f.value.is_number_float()) out.emplace_back(f.key, fmt::format("{:.{}f}", f.value.get<double>(), f.decimals));
    else if (f.value.is_string()) out.emplace_back(f.key, f.value.get<std::string>());
    else out.emplace_back(f.key, f.value.dump());
  }
  return out;
}

nlohmann::ordered_json summary_json(const TrainSummary& s) {
  nlohmann::ordered_json j;
  for (const Field& f : fields(s)) j[f.key] = f.value;
  return j;
}

}  // namespace seqtrain
