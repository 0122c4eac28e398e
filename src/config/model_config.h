// The `model:` section read through the model registry: the model-family checks a config must
// pass, and the ModelSpec it resolves to for data of a given shape. It lives in config/ (which
// the registry does not see) so the registry states facts about families and config/ applies
// them: the include arrows keep running down, config -> models.
#pragma once
#include <optional>
#include <string>

#include "config/config.h"
#include "models/registry.h"

namespace seqtrain {

// One config problem: the key to point at, and the message that follows the key's
// "file:line:col: " (config/load.cpp adds it).
struct ConfigProblem {
  std::string key, message;
};

// The family checks of a config (config/load.cpp calls it after its own cross-key checks):
// a family that cannot read text refused on data.source text, and each family's own checks of
// its settings (ModelFamily::check_settings; e.g. gpt's heads dividing hidden).
std::optional<ConfigProblem> check_model_config(const Config& config);

// The model a config builds for data of this shape.
ModelSpec spec_from_config(const Config& config, const DataShape& shape);

}  // namespace seqtrain
