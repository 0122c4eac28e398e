// What "the encoder" of a model is, for the three places that move one between models: `seqtrain
// export --encoder` (its tensors alone, with metadata saying what it is), `seqtrain embed` (the
// pooled vector a head reads) and model.encoder_from (a classifier started from a pretrained
// encoder, train/encoder_from.h). Every model that has one names its encoder tensors exactly as
// the classifier of the same family does (lstm/gru: rnn.*; transformer: input_proj.*, cls_token,
// pos_embed.weight, encoder.layers.{i}.*, encoder.norm.*; cnn: convs.{i}.*, norms.{i}.*), so "the encoder" is a rule over names
// rather than a per-family list: every tensor outside a head or a pretraining decoder. The family
// (lstm, gru, transformer) is read off the tensors themselves, so a file and a model are compared
// by what they hold, whatever model.type or task produced them.
#pragma once
#include <string>

#include "io/safetensors.h"
#include "models/registry.h"

namespace seqtrain {

// True for a tensor of the encoder: every name not under head., future_head., decoder. and not
// mask_token (the task-specific parts a classifier, forecaster or masked pretrainer adds).
bool is_encoder_tensor(const std::string& name);

// The encoder family the tensors hold: "transformer" (input_proj.weight), "cnn" (convs.0.weight), "lstm" or "gru"
// (rnn.weight_hh_l0 of 4 or 3 gates per hidden unit); "" when they hold no encoder of windows
// (mlp, gpt, and a char LM, whose RNN reads embed.weight's token embeddings).
std::string encoder_family(const WeightShapes& weights);
WeightShapes weight_shapes(const ParamStore& params);
WeightShapes weight_shapes(const SafetensorsFile& file);

// The safetensors __metadata__ of an exported encoder: format "seqtrain.encoder", version, family
// (lstm | gru | transformer) and the spec fields that rebuilding it needs (input_size, lookback,
// hidden, layers, bidirectional, heads, patch_size, positions, pooling, bias, embedding_size; cnn:
// kernel_sizes as "8,5,3" and norm, layer or batch),
// as strings (the format's rule). python/seqtrain_torch/encoder.py's load_encoder reads them.
Metadata encoder_metadata(const ModelSpec& spec, const std::string& family, int64_t embedding_size);
inline constexpr const char* kEncoderFormat = "seqtrain.encoder";

}  // namespace seqtrain
