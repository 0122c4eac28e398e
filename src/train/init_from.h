// init_from: starts a model from another run's weights (model.init_from) when the two do not
// name every tensor alike. Why it is not load_checkpoint: resuming needs every name and shape
// to match exactly, while a warm start often reuses part of a model under other names (a
// pretrained `encoder.*` filling this model's `rnn.*`) and leaves some tensors at their fresh
// initialisation (a new head). The prefix map and skip list say so explicitly, and strict mode
// (the default) still refuses anything left unaccounted for, so a typo never silently trains
// from random weights. Nothing is written into the model unless every check passes.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"
#include "io/safetensors.h"
#include "nn/params.h"

namespace seqtrain {

struct InitFromOptions {
  // "from=to": a source tensor named from + rest fills the model's to + rest. The longest
  // matching `from` wins; source names no entry matches keep their name. Each entry must match
  // at least one source tensor.
  std::vector<std::string> map;
  // Model tensor names, or name prefixes, left at their initialisation; a source tensor whose
  // (mapped) name matches is not read. Each entry must match a model or source tensor.
  std::vector<std::string> skip;
  // Every model tensor not skipped must be filled, and every source tensor not skipped must
  // fill one; false: leftovers on either side are allowed (and reported).
  bool strict = true;
};

struct InitFromReport {
  std::vector<std::string> filled;    // model tensors loaded, in the model's order
  std::vector<std::string> skipped;   // model tensors left at their initialisation by `skip`
  std::vector<std::string> unfilled;  // non-strict: model tensors the source had nothing for
  std::vector<std::string> unused;    // non-strict: source tensors (mapped names) the model lacks
};

InitFromOptions init_from_options(const ModelConfig& model);

// Loads `source` (a checkpoint directory, whose model.safetensors checksum is verified, or a
// .safetensors file of PyTorch state_dict names) into `params` under `options`. Throws Error
// naming the config key and the tensor(s) for: a map or skip entry that matches nothing (with
// the available names), a model tensor left unfilled in strict mode, a source tensor the model
// lacks in strict mode, two source tensors mapped onto one, and a shape mismatch (both shapes).
InitFromReport init_from(const std::string& source, ParamStore& params, const InitFromOptions& options);
// The same from a file already read (model.encoder_from checks it first: train/encoder_from.h).
InitFromReport init_from(const SafetensorsFile& file, ParamStore& params, const InitFromOptions& options);

}  // namespace seqtrain
