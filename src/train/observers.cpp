// The metrics log and the console: see observers.h.
#include "train/observers.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>

#include "core/text.h"

namespace seqtrain {

void MetricsObserver::on_step(const StepEvent& e) {
  nlohmann::json rec{{"split", "train"}, {"step", e.updates}, {"epoch", e.epoch}, {"loss", e.loss}, {"lr", e.lr},
                     {"grad_norm", e.grad_norm}, {"samples_per_s", e.samples_per_s}, {"time_s", e.time_s}};
  if (e.tokens_per_s) rec["tokens_per_s"] = *e.tokens_per_s;
  if (e.loss_scale) {
    rec["loss_scale"] = *e.loss_scale;
    rec["skipped_steps"] = e.skipped_since_last;
  }
  if (e.gpu) {
    rec["gpu_util"] = e.gpu->utilisation;
    rec["gpu_mem_mb"] = e.gpu->memory_used_mb;
    rec["gpu_power_w"] = e.gpu->power_w;
  }
  log_.write(rec);
}

void MetricsObserver::on_epoch(const EpochEvent& e) {
  log_.write({{"split", "data"}, {"step", e.updates}, {"epoch", e.epoch}, {"loss", nullptr}, {"lr", nullptr},
              {"samples_per_s", nullptr}, {"data_wait_s", e.data_wait_s},
              {"data_wait_share", e.data_wait_share}, {"epoch_train_s", e.train_s},
              {"time_s", e.time_s}});
}

void MetricsObserver::on_eval(const EvalEvent& e) {
  nlohmann::json rec = {{"split", e.split}, {"step", e.updates}, {"epoch", e.epoch}, {"loss", e.loss},
                        {"lr", e.lr ? nlohmann::json(*e.lr) : nlohmann::json()}, {"samples_per_s", nullptr},
                        {"time_s", e.time_s}};
  if (e.baseline) rec["baseline_last_value"] = *e.baseline;
  if (e.accuracy) rec["accuracy"] = *e.accuracy;
  if (e.forecast.is_object()) rec.update(e.forecast);
  log_.write(rec);
}

ConsoleObserver::ConsoleObserver(bool quiet) : quiet_(quiet), tty_(!quiet && isatty(fileno(stderr))) {}

void ConsoleObserver::on_note(const std::string& text) {
  if (!quiet_) std::fprintf(stderr, "seqtrain: %s\n", text.c_str());
}

void ConsoleObserver::on_warning(const std::string& text) { std::fprintf(stderr, "seqtrain: %s\n", text.c_str()); }

void ConsoleObserver::on_step(const StepEvent& e) {
  if (quiet_) return;
  const std::string eta = e.eta_s ? fmt::format("{:.0f}s", *e.eta_s) : "--";
  const std::string tokens = e.tokens_per_s ? fmt::format(" {:.0f} tokens/s", *e.tokens_per_s) : std::string();
  const std::string total = e.total_updates > 0 ? fmt::format("/{}", e.total_updates) : std::string();
  std::fprintf(stderr, "%sepoch %ld (%.0f%%) step %ld%s loss %.5f lr %.2e %.0f samples/s%s ETA %s%s", tty_ ? "\r" : "",
               (long)e.epoch, 100.0 * e.epoch_done, (long)e.updates, total.c_str(), e.loss, e.lr, e.samples_per_s,
               tokens.c_str(), eta.c_str(), tty_ ? "   " : "\n");
}

void ConsoleObserver::on_epoch(const EpochEvent& e) {
  if (quiet_) return;
  std::fprintf(stderr, "%sepoch %ld trained in %.2fs, data wait %.3fs (%.2f%%)\n", tty_ ? "\n" : "", (long)e.epoch,
               e.train_s, e.data_wait_s, 100.0 * e.data_wait_share);
}

void ConsoleObserver::on_eval(const EvalEvent& e) {
  if (quiet_ || e.split != "val") return;
  if (tty_) std::fputc('\n', stderr);
  std::string extra;
  if (e.baseline) extra = fmt::format(", last-value baseline {:.5f}", *e.baseline);
  std::string acc = e.accuracy ? fmt::format(", accuracy {:.4f}", *e.accuracy) : std::string();
  // The forecast's MAE in the targets' units beside the baselines', the bar it must clear.
  std::string mae;
  if (e.forecast.is_object() && e.forecast.value("mae", nlohmann::json()).is_number()) {
    mae = fmt::format(", mae {:.5g}", e.forecast["mae"].get<double>());
    std::string bars;
    if (e.forecast.contains("baseline"))
      for (const auto& [name, b] : e.forecast["baseline"].items())
        if (b.value("mae", nlohmann::json()).is_number())
          bars += fmt::format("{}{} {:.5g}", bars.empty() ? "" : ", ", name == "last_value" ? "last value" : "seasonal naive",
                              b["mae"].get<double>());
    if (!bars.empty()) mae += " (" + bars + ")";
  }
  const std::string best = e.monitor == "val_loss" ? fmt::format("best {:.5f}", e.best)
                                                  : fmt::format("best {} {:.5g}", e.monitor, e.best);
  // With the step: a validation counted in updates falls inside an epoch, before its "trained in".
  std::fprintf(stderr, "epoch %ld step %ld val loss %.5f (%s%s)%s%s\n", (long)e.epoch, (long)e.updates, e.loss,
               best.c_str(), extra.c_str(), acc.c_str(), mae.c_str());
}

void ConsoleObserver::on_end(const EndEvent& e) {
  const TrainSummary& s = *e.summary;
  if (s.stopped_by == "signal" || s.stopped_by == "stop_token") {
    const std::string why = s.stopped_by == "signal" ? fmt::format("signal {}", s.signal) : "request";
    std::fprintf(stderr, "seqtrain: stopped by %s after step %ld; checkpoints/last holds it. Continue with: "
                 "seqtrain train --resume %s\n", why.c_str(), (long)s.steps, e.run_dir.c_str());
    return;
  }
  if (quiet_) return;
  const std::string fp16 = e.loss_scale ? fmt::format(" ({} skipped on fp16 overflow, loss scale {})",
                                                      s.skipped_steps, *e.loss_scale) : "";
  const std::string test = s.test_loss ? fmt::format("test loss {:.5f}", *s.test_loss) : "no test split";
  const std::string best = std::isfinite(s.best_val) ? fmt::format("{:.5f}", s.best_val) : "none yet";
  std::fprintf(stderr, "seqtrain: stopped by %s after %s%s; best val loss %s, %s, %.1fs\n", s.stopped_by.c_str(),
               count_of(s.steps, "step").c_str(), fp16.c_str(), best.c_str(), test.c_str(), e.time_s);
}

}  // namespace seqtrain
