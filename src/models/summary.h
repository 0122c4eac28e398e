// The model summary: each layer of a model with its output shape and parameter count, and the
// total, as `seqtrain summary CONFIG` prints it and `seqtrain train` logs it at start (Keras'
// model.summary(), torchinfo's table). The layers come from the family's `layers` entry in the
// registry (what the model is made of, from its spec); the parameter counts come from the
// model's ParamStore, by name, so the table cannot disagree with what is trained: a parameter no
// listed layer owns shows as "(other)".
#pragma once
#include <string>
#include <vector>

#include "models/model.h"

namespace seqtrain {

// One layer as its family describes it. Batch dimensions are -1 (printed "B").
struct LayerRow {
  std::string name;    // e.g. "rnn.l0", "head", "transformer.h.0"
  std::string kind;    // e.g. "LSTM 4 -> 64", "Linear 64 -> 16"
  Shape output;        // the layer's output shape
  // Its parameters: those named `prefix` + "." + ..., and with `layer` (an RNN layer's "_l0")
  // only those of that layer. An empty prefix owns none (an input or a reshape).
  std::string prefix = {};
  std::string layer = {};
};

// The rows of each family (registry.cpp hands them to its table).
std::vector<LayerRow> rnn_forecaster_layers(const ModelSpec& s);
std::vector<LayerRow> mlp_layers(const ModelSpec& s);
std::vector<LayerRow> char_lm_layers(const ModelSpec& s);
std::vector<LayerRow> gpt_layers(const ModelSpec& s);
std::vector<LayerRow> transformer_layers(const ModelSpec& s);
std::vector<LayerRow> cnn_layers(const ModelSpec& s);

struct SummaryRow {
  std::string name, kind, output;
  int64_t params = 0;
};
// The family's layers with their parameter counts from `params` (plus "(other)" for any
// parameter no layer owns); their counts sum to params.size() less its buffers (BatchNorm's running
// statistics, which torch does not count as parameters either).
std::vector<SummaryRow> summarize(const ModelSpec& spec, const ParamStore& params);
// The table and the total, one line per entry, no trailing newline on the last.
std::vector<std::string> format_summary(const ModelSpec& spec, const ParamStore& params);

}  // namespace seqtrain
