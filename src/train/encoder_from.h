// model.encoder_from: a classifier, regressor or forecaster of family lstm, gru or transformer
// starts from a pretrained encoder (a run directory: its best checkpoint's model.safetensors,
// checksum-verified; or a file `seqtrain export RUN --encoder` wrote) with a fresh head. Why not
// model.init_from: that key needs the user to know every tensor name to map and skip, while
// "the encoder of that run under this head" is one rule (models/encoder.h). The loading itself is
// init_from's (train/init_from.h), with the skip list every tensor outside the encoder on either
// side (the source's head., decoder., mask_token; this model's head.); what this file adds is the
// checks that say what is wrong in the encoder's terms before anything is written: a source with
// no encoder, an encoder of another family, a missing or extra encoder tensor, another shape.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace seqtrain {

struct EncoderFromReport {
  std::string source;               // the file read
  std::string family;               // lstm | gru | transformer
  std::vector<std::string> filled;  // the model's encoder tensors, in the model's order
  std::vector<std::string> fresh;   // the model's tensors left at their initialisation (its head)
  int64_t values = 0;               // parameters filled
  std::string line() const;         // the one line the training log shows
};

// Fills `model`'s encoder tensors from `source` (see above); every error names model.encoder_from
// and the source, and leaves the model untouched: a source without encoder tensors (mlp, gpt,
// char LM), a model without an encoder, another family (both named), an encoder tensor missing on
// either side (with the source's encoder tensors), another shape (the tensor and both shapes).
EncoderFromReport encoder_from(const std::string& source, Model& model);

}  // namespace seqtrain
