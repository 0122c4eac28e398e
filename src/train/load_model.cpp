// load_model and the checkpoint lookup it shares with the commands. See load_model.h.
#include "train/load_model.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "backend/cuda_plugin.h"
#include "backend/registry.h"
#include "config/model_config.h"
#include "data/text.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

namespace seqtrain {
namespace fs = std::filesystem;

// A run directory means its best checkpoint. When a crash fell between moving the previous
// best aside and renaming the new one in, the previous one (.old-best) is whole: use it.
// (Only reading here; the next `train --resume` puts it back in place.)
std::string checkpoint_dir(const std::string& path, bool bare_ok) {
  const fs::path ck = fs::path(path) / "checkpoints";
  if (fs::exists(ck / "best" / "state.json")) return (ck / "best").string();
  if (!fs::exists(ck / "best") && fs::exists(ck / ".old-best" / "state.json")) return (ck / ".old-best").string();
  if (bare_ok && fs::exists(ck / "best" / "model.safetensors")) return (ck / "best").string();
  return path;
}

namespace {

Config run_config(const std::string& dir, const nlohmann::json& state) {
  return load_config_text(state.at("config").get<std::string>(), dir + "/state.json:config", ".", {});
}

// The data shape state.json's "io" (and "vocab") record, for checkpoints without "model_spec".
std::optional<DataShape> shape_from_io(const std::string& dir, const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("io")) return std::nullopt;
  const nlohmann::json& io = state.at("io");
  DataShape d{io.at("features").get<int64_t>(), io.at("steps").get<int64_t>(), io.at("outputs").get<int64_t>(), 0,
              io.at("classes").get<int64_t>()};
  if (state.contains("vocab") && !state.at("vocab").is_null())
    d.vocab = Vocab::from_json(state.at("vocab"), dir + "/state.json: vocab").size();
  return d;
}

WeightShapes weight_shapes(const std::string& file) {
  WeightShapes w;
  for (const NamedTensor& t : read_safetensors(file).tensors) w[t.name] = t.shape;
  return w;
}

// An export directory (`seqtrain export`): config.json with "format": "seqtrain.export" beside the
// weights. Null when `dir` is none; an Error naming the file when a field read here has the
// wrong type (an edited or damaged export), so no JSON type error reaches the commands.
nlohmann::json export_config(const fs::path& dir) {
  std::ifstream f(dir / "config.json");
  if (!f) return nullptr;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!is_export_config(j)) return nullptr;
  const std::string path = (dir / "config.json").string();
  ST_CHECK(j.contains("model_spec"),
           "{}: an export without \"model_spec\" (the model it holds); export the run again with this seqtrain", path);
  const auto expect = [&](const char* key, bool ok, const char* what) {
    ST_CHECK(ok, "{}: \"{}\" is not {}: the export is damaged or was edited; export the run again", path, key, what);
  };
  expect("model_spec", j["model_spec"].is_object(), "an object (the model it holds)");
  if (j.contains("precision")) expect("precision", j["precision"].is_string(), "a string");
  if (j.contains("checksums"))
    expect("checksums",
           j["checksums"].is_object() && (!j["checksums"].contains("model.safetensors") ||
                                          j["checksums"]["model.safetensors"].is_string()),
           "an object of the files' checksums");
  return j;
}

std::string describe(const ModelSpec& s) {
  return fmt::format("{} features x {} steps -> {} outputs, vocabulary {}", s.input_size, s.lookback, s.output_size,
                     s.vocab_size);
}

// state.json's "model_spec", its parse errors naming the file.
ModelSpec stored_spec(const std::string& dir, const nlohmann::json& state) {
  try {
    return spec_from_json(state.at("model_spec"));
  } catch (const Error& e) {
    fail("{}/state.json: {}", dir, e.what());
  }
}

// The runtime.precision a checkpoint's run trained with, which eval, predict and generate run it
// in as before the precision became the run's policy: the model_spec of versions that still kept
// it there, else the run's config (read for that one key, so a config of an older version with
// keys since renamed still serves), else fp32 (a bare directory, no config).
std::string trained_precision(const std::string& dir, const nlohmann::json& state) {
  if (!state.is_object()) return "fp32";
  const nlohmann::json& spec = state.value("model_spec", nlohmann::json::object());
  if (spec.is_object() && spec.contains("precision") && spec.at("precision").is_string())
    return spec.at("precision").get<std::string>();
  if (!state.contains("config")) return "fp32";
  try {
    const YAML::Node root = YAML::Load(state.at("config").get<std::string>());
    const YAML::Node runtime = root.IsMap() ? root["runtime"] : YAML::Node();
    const YAML::Node p = runtime.IsMap() ? runtime["precision"] : YAML::Node();
    return p.IsScalar() ? p.as<std::string>() : "fp32";
  } catch (const YAML::Exception& e) {
    fail("{}/state.json: its config does not parse: {}", dir, e.what());
  }
}

// A stored spec must fit the data the caller brings: refit_spec gives what that data builds.
void check_fits(const std::string& dir, const ModelSpec& s, const DataShape& shape) {
  const ModelSpec fit = refit_spec(s, shape);
  ST_CHECK(fit == s,
           "the data does not fit the model in {}: it was trained for {} ({}/state.json: model_spec) but the data "
           "gives {}; use data of the shape it was trained on",
           dir, describe(s), dir, describe(fit));
}
}  // namespace

bool is_export_config(const nlohmann::json& j) {
  return j.is_object() && j.contains("format") && j["format"] == "seqtrain.export";
}

CheckpointRef open_checkpoint(const std::string& path) {
  CheckpointRef c;
  c.dir = checkpoint_dir(path, false);
  ST_CHECK(fs::exists(fs::path(c.dir) / "state.json"),
           "'{}' is neither a checkpoint directory nor a run directory with checkpoints/best", path);
  c.state = read_checkpoint_state(c.dir);
  c.config = run_config(c.dir, c.state);
  return c;
}

// In order: "model_spec"; the weights (when asked for); the config with the caller's data shape
// or state.json's "io".
ModelSpec checkpoint_spec(const std::string& dir, const nlohmann::json& state, const LoadOptions& o,
                          std::string* from) {
  std::string ignored;
  if (!from) from = &ignored;
  const bool has_state = state.is_object();
  if (has_state && state.contains("model_spec")) {
    *from = "model_spec";
    return stored_spec(dir, state);
  }
  if (const nlohmann::json exported = export_config(dir); !has_state && !exported.is_null()) {
    *from = "export";
    try {
      return spec_from_json(exported.at("model_spec"));
    } catch (const Error& e) {
      fail("{}/config.json: {}", dir, e.what());
    }
  }
  const std::string weights = (fs::path(dir) / "model.safetensors").string();
  if (o.from_weights)
    if (std::optional<ModelSpec> s = spec_from_weights(weight_shapes(weights), weights)) {
      *from = "weights";
      return *s;
    }
  const std::optional<DataShape> shape = o.shape ? o.shape : shape_from_io(dir, state);
  if (has_state && state.contains("config") && shape) {
    *from = "config";
    return spec_from_config(run_config(dir, state), *shape);
  }
  const std::string generating = family_names_where([](const ModelFamily& f) { return f.generates_text; });
  ST_CHECK(!o.from_weights,
           "{} holds no character language model (no embed.weight / rnn.weight_hh_l0 / head.weight): generate needs "
           "a checkpoint of a {} run",
           weights, generating);
  fail("{}/state.json has no \"model_spec\", and no config and \"io\" section to rebuild the model from: the "
       "checkpoint was written by an older seqtrain; train the run again",
       dir);
}

LoadedModel load_model(const std::string& path, const LoadOptions& o) {
  LoadedModel l;
  l.dir = checkpoint_dir(path, o.bare_ok);
  const fs::path dir(l.dir);
  const bool has_state = fs::exists(dir / "state.json");
  const nlohmann::json exported = has_state ? nlohmann::json() : export_config(dir);
  if (o.bare_ok || !exported.is_null())
    ST_CHECK(fs::exists(dir / "model.safetensors"),
             "'{}' is neither a checkpoint directory (with model.safetensors) nor a run directory with "
             "checkpoints/best",
             path);
  else
    ST_CHECK(has_state,
             "'{}' is neither a checkpoint directory, a run directory with checkpoints/best, nor an export (`seqtrain "
             "export`)",
             path);
  if (has_state) l.state = read_checkpoint_state(l.dir);
  l.spec = checkpoint_spec(l.dir, l.state, o, &l.spec_from);
  if ((l.spec_from == "model_spec" || l.spec_from == "export") && o.shape) check_fits(l.dir, l.spec, *o.shape);
  // A GPU-trained checkpoint runs on this machine's GPU when it has one, else on the CPU: the
  // device that wrote it is not part of the model.
  try {
    if (backend_entry(l.spec.backend).gpu_ordinal) l.spec.backend = backend_for("cpu", "auto");
    l.precision = exported.is_null() ? trained_precision(l.dir, l.state) : exported.value("precision", std::string("fp32"));
    l.model = build_model(l.spec, ModelEnv{.precision = resolve_precision(l.precision, l.spec.backend, nullptr)});
  } catch (const Error& e) {
    if (l.spec_from != "export") throw;  // a checkpoint's spec comes sealed (or from its config)
    fail("{}/config.json: its model_spec does not build a model: {}; export the run again", l.dir, e.what());
  }
  // With state.json the checksums are verified, an export's against the one its config.json
  // records; a bare directory has nothing to verify against.
  if (has_state) {
    load_checkpoint(l.dir, l.model->params());
    return l;
  }
  const std::string weights = (dir / "model.safetensors").string();
  const std::string want = exported.is_null() ? std::string() : exported.value("/checksums/model.safetensors"_json_pointer, std::string());
  ST_CHECK(want.empty() || file_checksum(weights) == want,
           "{} does not match the checksum its export recorded ({}/config.json: checksums): the file changed or is "
           "damaged; export the run again",
           weights, l.dir);
  load_params(weights, l.model->params());
  return l;
}

}  // namespace seqtrain
