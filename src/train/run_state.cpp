// RunState <-> state.json: see run_state.h.
#include "train/run_state.h"

#include <cmath>

#include "core/error.h"

namespace seqtrain {

nlohmann::json RunState::to_json() const {
  nlohmann::json st;
  st["tag"] = tag;
  st["epoch"] = epoch;
  st["batch_in_epoch"] = batch_in_epoch;
  st["micro_steps"] = micro_steps;
  st["updates"] = updates;
  st["bad_validations"] = bad_validations;
  st["best_val"] = std::isfinite(best_val) ? nlohmann::json(best_val) : nlohmann::json();
  st["seed"] = seed;
  st["threads"] = threads;
  st["cpu_isa"] = cpu_isa;
  st["time_s"] = time_s;
  st["pending_loss_sum"] = pending_loss_sum;
  st["pending_loss_count"] = pending_loss_count;
  st["metrics_bytes"] = metrics_bytes;
  st["config_hash"] = config_hash;
  st["config"] = config_yaml;
  st["normalizer"] = normalizer;
  st["io"] = io;
  if (!vocab.is_null()) st["vocab"] = vocab;
  if (!model_spec.is_null()) st["model_spec"] = model_spec;
  st["features"] = features;
  st["targets"] = targets;
  st["schedule"] = schedule;
  if (!loss_scaler.is_null()) st["loss_scaler"] = loss_scaler;
  return st;
}

RunState RunState::from_json(const nlohmann::json& j) {
  RunState s;
  try {
    s.tag = j.value("tag", std::string());
    s.epoch = j.at("epoch");
    s.batch_in_epoch = j.at("batch_in_epoch");
    s.micro_steps = j.at("micro_steps");
    s.updates = j.at("updates");
    s.bad_validations = j.at("bad_validations");
    if (!j.at("best_val").is_null()) s.best_val = j.at("best_val");
    s.seed = j.value("seed", uint64_t{0});
    s.threads = j.value("threads", int64_t{0});
    s.cpu_isa = j.value("cpu_isa", std::string());
    s.time_s = j.value("time_s", 0.0);
    s.pending_loss_sum = j.value("pending_loss_sum", 0.0);
    s.pending_loss_count = j.value("pending_loss_count", int64_t{0});
    s.metrics_bytes = j.value("metrics_bytes", int64_t{-1});
    s.config_hash = j.value("config_hash", std::string());
    s.config_yaml = j.value("config", std::string());
    s.normalizer = j.value("normalizer", nlohmann::json());
    s.io = j.value("io", nlohmann::json());
    s.vocab = j.value("vocab", nlohmann::json());
    s.model_spec = j.value("model_spec", nlohmann::json());
    s.features = j.value("features", std::vector<std::string>{});
    s.targets = j.value("targets", std::vector<std::string>{});
    s.schedule = j.at("schedule");
    s.loss_scaler = j.value("loss_scaler", nlohmann::json());
  } catch (const nlohmann::json::exception& e) {
    fail("state.json: a field is missing or has the wrong type ({}); the checkpoint was not written by this "
         "version of seqtrain or was edited", e.what());
  }
  return s;
}

}  // namespace seqtrain
