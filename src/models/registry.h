// The model registry: one table entry per model family. Which names config accepts, the checks
// a family adds to a config, the spec a config and a data shape resolve to, how a model is built
// and whether it generates text were string compares spread over config/, train/, models/ and
// cli/; they are all questions to this table now, so adding a family (a GPT, say) is one entry
// here and nothing else compares a model.type.
//
// models/ sits below train/, so the data's shape comes in as a DataShape (train/ fills it from
// its DataPlan), and the config only as the plain settings struct of config/config.h.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/model.h"

namespace seqtrain {

class TextGenerator;
struct LayerRow;  // models/summary.h

// What a model is built to read and produce, as the data source reports it.
struct DataShape {
  int64_t features = 0;  // input features per step
  int64_t steps = 0;     // steps per sample (window length, text block size)
  int64_t outputs = 0;   // model outputs per sample
  int64_t vocab = 0;     // > 0: the inputs are token ids of a vocabulary this size (text)
  int64_t classes = 0;   // > 0: the targets are labels of this many classes
  int64_t future_steps = 0;  // windowed series: x's rows after the lookback (data.future_features)
  std::vector<int64_t> target_inputs = {};  // windowed series: each target's feature index (model.residual_to)
};

// Weight names -> shapes of a checkpoint, for recovering a spec without its config.
using WeightShapes = std::map<std::string, Shape>;

struct ModelFamily {
  std::string title{};               // for messages, e.g. "RNN forecaster / classifier"
  std::vector<std::string> names{};  // the model.type values it answers to, in docs order
  std::vector<RnnCell> cells{};      // names[i]'s RNN cell; empty for a family without an RNN
  bool is_language_model = false;    // reads token ids and needs a vocabulary
  bool generates_text = false;       // its models implement TextGenerator
  bool text_becomes_lm = false;      // on text data, names[i] means the language model of cells[i]
  // Whether train.task masked_pretrain can build it with a reconstruction head
  // (models/reconstruction_head.h): an encoder of float sequences.
  bool pretrains = false;
  // What model.pooling auto means for it: how its steps become the one vector a head reads.
  std::string default_pooling = "last";
  // Whether it reads model.kernel_sizes (config/model_config.cpp refuses the key elsewhere).
  bool convolutional = false;
  // Which of its layers follow the run's precision policy (ModelEnv::precision), for the log; empty:
  // it always runs in fp32.
  std::string precision_covers{};
  // Whether it can train on text data (config/model_config.cpp refuses the others there).
  bool reads_text() const { return is_language_model || text_becomes_lm; }
  // Writes the spec fields that depend on the data (sizes of input, output, vocabulary).
  std::function<void(ModelSpec&, const DataShape&)> fit_shape{};
  std::function<std::unique_ptr<Model>(const ModelSpec&, const ModelEnv&)> build{};
  // The checks a family adds to the settings a config gives it, before any data is read: the
  // config key to point at and the message, or nullopt. May be empty.
  std::function<std::optional<std::pair<std::string, std::string>>(const ModelSpec&)> check_settings{};
  // A spec from weight shapes alone, nullopt when the weights are not this family's; may be
  // empty. Lets generate read language models saved without a config (e.g. from PyTorch).
  std::function<std::optional<ModelSpec>(const WeightShapes&, const std::string& file)> from_weights{};
  // Its layers with their output shapes, for the model summary (models/summary.h).
  std::function<std::vector<LayerRow>(const ModelSpec&)> layers{};

  RnnCell cell(const std::string& name) const;  // error when the family has no RNN
};

const std::vector<ModelFamily>& model_families();
// Every registered model.type, in table order.
std::vector<std::string> model_type_names();
// The family of `type`, or an error that lists every registered name.
const ModelFamily& family(const std::string& type);
const ModelFamily* find_family(const std::string& type);  // null when not registered
// The RNN cell of `type` (lstm, char_gru, ...).
RnnCell rnn_cell(const std::string& type);
// "a, b or c" of the names of the families `pick` selects (for messages).
std::string family_names_where(const std::function<bool(const ModelFamily&)>& pick);

// The model.type a config's type means for data of this shape (lstm on text: char_lstm).
std::string resolve_type(const std::string& type, const DataShape& shape);
// `spec` with its data-dependent fields rewritten for `shape`; equal to `spec` when the data
// fits a model of that spec.
ModelSpec refit_spec(const ModelSpec& spec, const DataShape& shape);
// A spec from weight shapes, trying each family that can; nullopt when none recognises them.
std::optional<ModelSpec> spec_from_weights(const WeightShapes& weights, const std::string& file);

// The resolved spec as JSON (state.json's "model_spec") and back. Keys missing from the JSON
// keep ModelSpec's defaults, so specs written before a field existed still load.
nlohmann::json spec_to_json(const ModelSpec& spec);
ModelSpec spec_from_json(const nlohmann::json& j);

// The settings problem of a family's check_settings: the config key and the message.
using SettingsProblem = std::optional<std::pair<std::string, std::string>>;
// model.heads must divide model.hidden (every transformer: gpt, transformer).
SettingsProblem heads_problem(const ModelSpec& spec);

// Builds the family's model (make_model calls this).
std::unique_ptr<Model> build_model(const ModelSpec& spec, const ModelEnv& env = {});
// The model's text-generation interface, or an error naming its type when its family does not
// generate text.
TextGenerator& text_generator(Model& model);

}  // namespace seqtrain
