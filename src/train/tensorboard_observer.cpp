// The TensorBoard observer: see tensorboard_observer.h.
#include "train/tensorboard_observer.h"

#include <cstdio>

#include "core/error.h"
#include "train/metrics.h"

namespace seqtrain {
namespace fs = std::filesystem;
using tensorboard::Scalar;

namespace {

// A record's numbers are doubles; TensorBoard keeps floats.
Scalar scalar(std::string tag, double value) { return Scalar{std::move(tag), static_cast<float>(value)}; }

// Every number in `j` under its JSON path: the forecast report's metrics, its baselines' and
// per-target ones. Strings, arrays (the quantile interval's levels) and nulls (a metric
// undefined on this data, e.g. MAPE over zeros) are not scalars.
void add_numbers(const nlohmann::json& j, const std::string& prefix, std::vector<Scalar>& out) {
  if (!j.is_object()) return;
  for (const auto& [key, value] : j.items()) {
    if (value.is_number()) out.push_back(scalar(prefix + key, value.get<double>()));
    else if (value.is_object()) add_numbers(value, prefix + key + "/", out);
  }
}

constexpr double kFlushEveryS = 10;

}  // namespace

TensorBoardObserver::TensorBoardObserver(const fs::path& run_dir, std::optional<int64_t> start_step)
    : file_(std::make_unique<tensorboard::EventsFile>(run_dir)) {
  path_ = file_->path();
  if (start_step) file_->session_start(*start_step);
  file_->flush();  // the file shows up in TensorBoard from the start
}

// Runs one write; an error stops TensorBoard logging with one warning and lets the run go on.
template <typename F>
void TensorBoardObserver::guarded(F&& write) {
  if (!file_) return;
  try {
    write();
  } catch (const Error& e) {
    std::fprintf(stderr, "seqtrain: warning: %s. TensorBoard logging stops here; training goes on\n", e.what());
    file_.reset();
  }
}

void TensorBoardObserver::write(int64_t step, const std::vector<Scalar>& values) {
  guarded([&] { file_->scalars(step, values); });
}

void TensorBoardObserver::on_step(const StepEvent& e) {
  std::vector<Scalar> v = {scalar("train/loss", e.loss), scalar("train/lr", e.lr),
                           scalar("train/grad_norm", e.grad_norm), scalar("train/samples_per_s", e.samples_per_s)};
  if (e.tokens_per_s) v.push_back(scalar("train/tokens_per_s", *e.tokens_per_s));
  if (e.loss_scale) {
    v.push_back(scalar("train/loss_scale", *e.loss_scale));
    v.push_back(scalar("train/skipped_steps", static_cast<double>(e.skipped_since_last)));
  }
  if (e.gpu) {
    v.push_back(scalar("gpu/utilization", e.gpu->utilisation));
    v.push_back(scalar("gpu/memory_used_mib", e.gpu->memory_used_mb));
    v.push_back(scalar("gpu/power_w", e.gpu->power_w));
  }
  write(e.updates, v);
  guarded([&] {
    if (file_->unflushed_s() >= kFlushEveryS) file_->flush();
  });
}

void TensorBoardObserver::on_epoch(const EpochEvent& e) {
  write(e.updates, {scalar("train/data_wait_share", e.data_wait_share)});
}

void TensorBoardObserver::on_eval(const EvalEvent& e) {
  const std::string p = e.split + "/";
  std::vector<Scalar> v = {scalar(p + "loss", e.loss)};
  if (e.accuracy) v.push_back(scalar(p + "accuracy", *e.accuracy));
  if (e.baseline) v.push_back(scalar(p + "baseline_last_value", *e.baseline));
  add_numbers(e.forecast, p, v);
  write(e.updates, v);
  guarded([&] { file_->flush(); });
}

void TensorBoardObserver::on_end(const EndEvent&) {
  guarded([&] { file_->close(); });
}

nlohmann::json TensorBoardObserver::position() {
  guarded([&] { file_->flush(); });
  if (!file_) return nullptr;
  return {{"file", path_.filename().string()}, {"bytes", file_->bytes()}};
}

void cut_events_files(const fs::path& run_dir, const nlohmann::json& position, const fs::path& keep) {
  if (!position.is_object() || !position.contains("file") || !position.contains("bytes")) return;
  ST_CHECK(position["file"].is_string() && position["bytes"].is_number_integer(),
           "state.json: \"tensorboard\" is not {{\"file\": name, \"bytes\": length}}; the checkpoint was not written "
           "by seqtrain or was edited");
  const std::string name = position["file"].get<std::string>();
  // Only a file of ours directly in the run directory: state.json is not trusted with a path.
  ST_CHECK(tensorboard::is_seqtrain_events_file(name) && fs::path(name).filename() == name,
           "state.json: \"tensorboard\" names '{}', not a seqtrain events file; the checkpoint was edited", name);
  truncate_metrics((run_dir / name).string(), position["bytes"].get<int64_t>());
  // Names sort as TensorBoard reads them: by the seconds they were started at.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string other = entry.path().filename().string();
    if (tensorboard::is_seqtrain_events_file(other) && other > name && other != keep.filename().string())
      fs::remove(entry.path(), ec);
  }
}

void remove_earlier_events_files(const fs::path& run_dir, const fs::path& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const fs::path& p = entry.path();
    if (tensorboard::is_seqtrain_events_file(p.filename().string()) && p.filename() != keep.filename())
      fs::remove(p, ec);
  }
}

}  // namespace seqtrain
