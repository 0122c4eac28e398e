// Checkpoint: the on-disk contract of design.md. A directory checkpoints/<tag>/ holding
//   model.safetensors      weights, PyTorch state_dict names
//   optimizer.safetensors  optimizer moments, "<buffer>.<param name>" per tensor
//   state.json             step, epoch, RNG/data cursor, best metric, config hash,
//                          normalization statistics, schedule state, file checksums
// written into a temporary directory, fsynced, then renamed into place. load_checkpoint()
// verifies the checksums and the model's parameter names and shapes before touching anything.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "nn/params.h"
#include "optim/optimizer.h"

namespace seqtrain {

struct CheckpointData {
  const ParamStore* params = nullptr;  // source of weights (and of the optimizer's layout)
  OptimizerState optimizer;
  nlohmann::json state;                // everything else; "checksums" is filled in on save
};

// Writes dir (e.g. run/checkpoints/best) atomically.
void save_checkpoint(const std::string& dir, const CheckpointData& data);

// Verifies checksums, loads weights into `params` (names and shapes must match) and returns
// state.json; when `optimizer` is given, fills it with the saved moments.
nlohmann::json load_checkpoint(const std::string& dir, ParamStore& params, OptimizerState* optimizer = nullptr);

}  // namespace seqtrain
