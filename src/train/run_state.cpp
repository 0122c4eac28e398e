// RunState <-> state.json: see run_state.h. One field list serves the writer and the reader.
#include "train/run_state.h"

#include <cmath>

#include "core/error.h"

namespace seqtrain {
namespace {

// omitted: an optional field left out of the file while it is null (as earlier versions did).
enum Need { required, optional, omitted };

// Calls v(key, member, need) once per state.json field. S is RunState or const RunState.
template <typename S, typename V>
void visit_state(S& s, V&& v) {
  v("tag", s.tag, optional);
  v("epoch", s.epoch, required);
  v("batch_in_epoch", s.batch_in_epoch, required);
  v("micro_steps", s.micro_steps, required);
  v("updates", s.updates, required);
  v("bad_validations", s.bad_validations, required);
  v("best_val", s.best_val, required);  // null while nothing was validated
  v("best_val_loss", s.best_val_loss, optional);  // absent before train.monitor: best_val was the loss
  v("seed", s.seed, optional);
  v("threads", s.threads, optional);
  v("cpu_isa", s.cpu_isa, optional);
  v("time_s", s.time_s, optional);
  v("pending_loss_sum", s.pending_loss_sum, optional);
  v("pending_loss_count", s.pending_loss_count, optional);
  v("metrics_bytes", s.metrics_bytes, optional);
  v("tensorboard", s.tensorboard, omitted);
  v("config_hash", s.config_hash, optional);
  v("config", s.config_yaml, optional);
  v("normalizer", s.normalizer, optional);
  v("io", s.io, optional);
  v("vocab", s.vocab, omitted);
  v("model_spec", s.model_spec, omitted);
  v("features", s.features, optional);
  v("targets", s.targets, optional);
  v("schedule", s.schedule, required);
  v("loss_scaler", s.loss_scaler, omitted);
}

// Non-finite numbers are written as null (JSON has no inf).
struct Writer {
  nlohmann::json& j;
  void operator()(const char* key, const double& x, Need) { j[key] = std::isfinite(x) ? nlohmann::json(x) : nullptr; }
  void operator()(const char* key, const nlohmann::json& x, Need need) {
    if (need != omitted || !x.is_null()) j[key] = x;
  }
  template <typename T> void operator()(const char* key, const T& x, Need) { j[key] = x; }
};

// A null or missing optional field keeps its default; a missing required one is an error.
struct Reader {
  const nlohmann::json& j;
  template <typename T> void operator()(const char* key, T& x, Need need) {
    if (!j.contains(key)) {
      if (need == required)
        fail("state.json has no \"{}\"; the checkpoint was not written by seqtrain or was edited", key);
      return;
    }
    if (j.at(key).is_null()) return;
    try {
      x = j.at(key).get<T>();
    } catch (const nlohmann::json::exception& e) {
      fail("state.json: \"{}\" has the wrong type ({}); the checkpoint was not written by seqtrain or was edited",
           key, e.what());
    }
  }
};

}  // namespace

nlohmann::json RunState::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  visit_state(*this, Writer{j});
  return j;
}

RunState RunState::from_json(const nlohmann::json& j) {
  ST_CHECK(j.is_object(), "state.json is not a JSON object; the checkpoint is damaged");
  RunState s;
  s.metrics_bytes = -1;  // absent in old checkpoints: the metrics log is then not cut
  visit_state(s, Reader{j});
  if (!j.contains("best_val_loss")) s.best_val_loss = s.best_val;  // written before train.monitor
  return s;
}

}  // namespace seqtrain
