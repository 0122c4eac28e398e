// load_model: the one way from a run, checkpoint or export directory to a trained model, shared by
// eval, predict, generate and export; `train --resume` reads a checkpoint's spec through the
// same checkpoint_spec. It lives in train/ because it needs only config, checkpoint and
// registry, and train/ may be used by every command. Each used to rebuild its model its own way;
// now the spec comes from state.json's "model_spec" (the spec the trainer resolved), the model
// is built through the registry and the weights load with load_checkpoint's checksum checks.
// The model runs in the precision its run trained with (the run's runtime.precision; fp32 for a
// bare directory), resolved on this machine as the training loop resolves it.
// Checkpoints written before "model_spec" existed fall back to what the commands did before:
// the config in state.json with the data's shape (the caller's, or state.json's "io"), or for
// a language model saved without a config, the shapes of its weights.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "config/config.h"
#include "models/registry.h"

namespace seqtrain {

// A checkpoint a command reads: its directory, state.json and the config it was trained with.
struct CheckpointRef {
  std::string dir;
  nlohmann::json state;
  Config config;
};
// The checkpoint directory `path` means: a run directory's checkpoints/best (or .old-best after a
// crash between moving best aside and renaming the new one in; with bare_ok a best without
// state.json), else `path` itself. Nothing is verified.
std::string checkpoint_dir(const std::string& path, bool bare_ok = false);

// Whether a parsed config.json is a `seqtrain export`'s ("format": "seqtrain.export"), whatever
// else it holds.
bool is_export_config(const nlohmann::json& config_json);

// `path` is a checkpoint directory or a run directory (its checkpoints/best, or .old-best when a
// crash fell between moving best aside and renaming the new one in). Error when it is neither.
CheckpointRef open_checkpoint(const std::string& path);

struct LoadOptions {
  // The shape of the data the caller will feed (eval, predict). Without "model_spec" it gives
  // the spec with the run's config; with one, data that does not fit the model is an error.
  std::optional<DataShape> shape = std::nullopt;
  // Without "model_spec", read the spec off the weights first (language models; generate).
  bool from_weights = false;
  // Accept a directory holding model.safetensors but no state.json (weights saved by PyTorch's
  // save_seqtrain); nothing is verified then.
  bool bare_ok = false;
};

struct LoadedModel {
  std::string dir;        // the checkpoint directory read
  nlohmann::json state;   // its state.json; null for a bare directory
  ModelSpec spec;
  std::string spec_from;  // "model_spec", "export", "config" or "weights": where the spec came from
  std::string precision;  // the runtime.precision the model runs in (its run's; an export's records it)
  std::unique_ptr<Model> model;
};

LoadedModel load_model(const std::string& run_or_checkpoint, const LoadOptions& options = {});

// The spec checkpoint `dir` (state.json parsed into `state`, null for a bare directory) was
// trained as, the way load_model finds it: state.json's "model_spec"; else (options.from_weights)
// the weight shapes; else the stored config with options.shape or state.json's "io". `from`
// receives "model_spec", "weights" or "config". A "model_spec" is returned as stored, not yet
// checked against options.shape (load_model does that; a resumed run compares it field by field).
ModelSpec checkpoint_spec(const std::string& dir, const nlohmann::json& state, const LoadOptions& options = {},
                          std::string* from = nullptr);

}  // namespace seqtrain
