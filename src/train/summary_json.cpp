// The end-of-run summary. See summary_json.h.
#include "train/summary_json.h"

#include <cmath>
#include <fmt/format.h>

#include "core/build_info.h"

namespace seqtrain {

namespace {
std::string number(double v) { return fmt::format("{:.6f}", v); }
}  // namespace

std::vector<std::pair<std::string, std::string>> summary_lines(const TrainSummary& s) {
  std::vector<std::pair<std::string, std::string>> out{{"stopped_by", s.stopped_by},
                                                       {"epochs", std::to_string(s.epochs)},
                                                       {"steps", std::to_string(s.steps)}};
  out.emplace_back("best_val_loss", std::isfinite(s.best_val) ? number(s.best_val) : "none yet");
  if (s.test_loss) out.emplace_back("test_loss", number(*s.test_loss));
  if (s.test_accuracy) out.emplace_back("test_accuracy", number(*s.test_accuracy));
  if (s.baseline_val) out.emplace_back("baseline_last_value_val_mse", number(*s.baseline_val));
  if (s.skipped_steps > 0) out.emplace_back("skipped_steps", std::to_string(s.skipped_steps));
  out.emplace_back("time_s", fmt::format("{:.2f}", s.time_s));
  out.emplace_back("checkpoint_block_s", fmt::format("{:.4f}", s.checkpoint_block_s));
  return out;
}

nlohmann::ordered_json summary_json(const TrainSummary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  const BuildInfo& b = build_info();
  nlohmann::ordered_json j = {{"stopped_by", s.stopped_by},
                      {"epochs", s.epochs},
                      {"steps", s.steps},
                      {"best_val_loss", std::isfinite(s.best_val) ? nlohmann::json(s.best_val) : nlohmann::json()},
                      {"test_loss", opt(s.test_loss)},
                      {"test_accuracy", opt(s.test_accuracy)},
                      {"baseline_last_value_val_mse", opt(s.baseline_val)},
                      {"skipped_steps", s.skipped_steps},
                      {"time_s", s.time_s},
                      {"checkpoint_block_s", s.checkpoint_block_s},
                      {"seqtrain", fmt::format("{} ({})", b.version, b.commit)}};
  if (s.stopped_by == "signal") j["signal"] = s.signal;
  return j;
}

}  // namespace seqtrain
