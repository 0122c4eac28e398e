// The model families and the queries over them. See registry.h.
#include "models/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "models/char_lm.h"
#include "models/cnn_encoder.h"
#include "models/forecaster.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "models/summary.h"
#include "models/text_generator.h"
#include "models/transformer_encoder.h"

namespace seqtrain {

namespace {
std::string join_or(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
  return out;
}

// Forecasters and classifiers: windows of `features` values over `steps` in, `outputs` out.
void fit_windows(ModelSpec& s, const DataShape& d) {
  s.input_size = d.features;
  s.lookback = d.steps - d.future_steps;  // x's rows after the lookback are the known future
  s.future_steps = d.future_steps;
  s.output_size = d.outputs;
}

// A language model also takes its vocabulary from the data (it is not a config key).
void fit_tokens(ModelSpec& s, const DataShape& d) {
  fit_windows(s, d);
  s.vocab_size = d.vocab;
}

// The char LM's shape read off its weights: embed.weight [V, E], rnn.weight_hh_l{k} [G*H, H].
std::optional<ModelSpec> char_lm_from_weights(const WeightShapes& w, const std::string& file) {
  if (!w.count("embed.weight") || !w.count("head.weight") || !w.count("rnn.weight_hh_l0")) return std::nullopt;
  ModelSpec s;
  const Shape& emb = w.at("embed.weight");
  const Shape& whh = w.at("rnn.weight_hh_l0");
  ST_CHECK(emb.size() == 2 && whh.size() == 2 && whh[0] % whh[1] == 0, "{}: embed.weight {} or rnn.weight_hh_l0 {} has "
           "an unexpected shape; the file is damaged", file, shape_str(emb), shape_str(whh));
  s.vocab_size = emb[0];
  s.embed_size = emb[1];
  s.hidden = whh[1];
  const int64_t G = whh[0] / whh[1];
  ST_CHECK(G == 4 || G == 3, "{}: rnn.weight_hh_l0 {} is neither an LSTM's [4H, H] nor a GRU's [3H, H]", file,
           shape_str(whh));
  const RnnCell cell = G == 4 ? RnnCell::lstm : RnnCell::gru;
  for (const ModelFamily& f : model_families())
    for (size_t i = 0; i < f.cells.size(); ++i)
      if (f.is_language_model && f.cells[i] == cell) s.type = f.names[i];
  s.layers = 0;
  while (w.count("rnn.weight_hh_l" + std::to_string(s.layers))) ++s.layers;
  ST_CHECK(!w.count("rnn.weight_hh_l0_reverse"), "{}: a bidirectional RNN cannot be a language model", file);
  return s;
}

// The encoder keys (model.pooling, model.positions, model.patch_size) a family without them must
// leave at their defaults: `poolings` are the ones it has, positions and patches only the
// transformer's. `type` names the family in the message.
SettingsProblem encoder_keys_problem(const ModelSpec& s, const std::string& type,
                                     const std::vector<std::string>& poolings) {
  if (std::find(poolings.begin(), poolings.end(), s.pooling) == poolings.end())
    return std::make_pair(std::string("model.pooling"),
                          fmt::format("config key 'model.pooling' is {}, which model.type {} does not have: use {}{}",
                                      s.pooling, type, join_or(poolings),
                                      s.pooling == "cls" ? " (a cls token needs model.type transformer)" : ""));
  if (s.positions != "auto")
    return std::make_pair(std::string("model.positions"),
                          fmt::format("config key 'model.positions' is {}, but model.type {} has no position "
                                      "settings (only transformer does): leave it auto", s.positions, type));
  if (s.patch_size != 1)
    return std::make_pair(std::string("model.patch_size"),
                          fmt::format("config key 'model.patch_size' is {}, but model.type {} reads one step at a time "
                                      "(only transformer makes patches): leave it 1", s.patch_size, type));
  return std::nullopt;
}

// check_settings of a family that pools `poolings` and has no positions or patches.
auto encoder_keys(std::string type, std::vector<std::string> poolings) {
  return [type = std::move(type), poolings = std::move(poolings)](const ModelSpec& s) {
    return encoder_keys_problem(s, type, poolings);
  };
}

// The cnn: its layers are model.kernel_sizes' (model.layers left alone, or agreeing), and it has
// no positions or patches.
SettingsProblem cnn_settings(const ModelSpec& s) {
  const int64_t n = static_cast<int64_t>(s.kernel_sizes.size());
  if (s.layers != 1 && s.layers != n)
    return std::make_pair(std::string("model.layers"),
                          fmt::format("config key 'model.layers' is {}, but model.type cnn has one conv layer per entry "
                                      "of model.kernel_sizes ({} now): leave model.layers out and list {} kernel sizes "
                                      "in model.kernel_sizes instead", s.layers, n, s.layers));
  return encoder_keys_problem(s, "cnn", {"last", "mean", "max"});
}

// The cnn's depth is its kernel list's length.
void fit_cnn(ModelSpec& s, const DataShape& d) {
  fit_windows(s, d);
  s.layers = static_cast<int64_t>(s.kernel_sizes.size());
}

SettingsProblem gpt_settings(const ModelSpec& s) {
  if (auto p = heads_problem(s)) return p;
  return encoder_keys_problem(s, "gpt", {"last"});
}

template <typename M>
std::unique_ptr<Model> make(const ModelSpec& s, const ModelEnv& env) {
  if constexpr (std::is_constructible_v<M, const ModelSpec&, const ModelEnv&>) return std::make_unique<M>(s, env);
  else return std::make_unique<M>(s);
}

std::vector<ModelFamily> make_families() {
  std::vector<ModelFamily> f;
  f.push_back({.title = "RNN forecaster / classifier",
               .names = {"lstm", "gru"},
               .cells = {RnnCell::lstm, RnnCell::gru},
               .text_becomes_lm = true,
               .pretrains = true,
               .precision_covers = "its RNN layers",
               .fit_shape = fit_windows,
               .build = make<Forecaster>,
               .check_settings = encoder_keys("lstm / gru", {"last", "mean", "max"}),
               .layers = rnn_forecaster_layers});
  f.push_back({.title = "MLP forecaster",
               .names = {"mlp"},
               .fit_shape = fit_windows,
               .build = make<MlpForecaster>,
               .check_settings = encoder_keys("mlp", {"last"}),
               .layers = mlp_layers});
  f.push_back({.title = "character language model",
               .names = {"char_lstm", "char_gru"},
               .cells = {RnnCell::lstm, RnnCell::gru},
               .is_language_model = true,
               .generates_text = true,
               .precision_covers = "its RNN layers",
               .fit_shape = fit_tokens,
               .build = make<CharLm>,
               .check_settings = encoder_keys("char_lstm / char_gru", {"last"}),
               .from_weights = char_lm_from_weights,
               .layers = char_lm_layers});
  f.push_back({.title = "GPT (nanoGPT's character / token transformer)",
               .names = {"gpt"},
               .is_language_model = true,
               .generates_text = true,
               .precision_covers = "every matrix product: its Linear layers, attention and tied head",
               .fit_shape = fit_tokens,
               .build = make<Gpt>,
               .check_settings = gpt_settings,
               .layers = gpt_layers});
  f.push_back({.title = "transformer encoder (forecaster / classifier)",
               .names = {"transformer"},
               .pretrains = true,
               .precision_covers = "its encoder blocks: their Linear layers and attention",
               .fit_shape = fit_windows,
               .build = make<TransformerEncoder>,
               .check_settings = heads_problem,
               .layers = transformer_layers});
  f.push_back({.title = "convolutional encoder (FCN: forecaster / classifier)",
               .names = {"cnn"},
               .pretrains = true,
               .default_pooling = "mean",
               .convolutional = true,
               .fit_shape = fit_cnn,
               .build = make<CnnEncoder>,
               .check_settings = cnn_settings,
               .layers = cnn_layers});
  return f;
}
}  // namespace

SettingsProblem heads_problem(const ModelSpec& s) {
  if (s.heads >= 1 && s.hidden % s.heads == 0) return std::nullopt;
  return std::make_pair(std::string("model.heads"),
                        fmt::format("config key 'model.heads' is {}, which does not divide model.hidden {}: each head "
                                    "takes hidden / heads channels; pick heads among the divisors of {}",
                                    s.heads, s.hidden, s.hidden));
}

RnnCell ModelFamily::cell(const std::string& name) const {
  for (size_t i = 0; i < cells.size() && i < names.size(); ++i)
    if (names[i] == name) return cells[i];
  fail("model.type '{}' has no RNN layers ({})", name, title);
}

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = make_families();
  return families;
}

std::vector<std::string> model_type_names() {
  std::vector<std::string> out;
  for (const ModelFamily& f : model_families()) out.insert(out.end(), f.names.begin(), f.names.end());
  return out;
}

const ModelFamily* find_family(const std::string& type) {
  for (const ModelFamily& f : model_families())
    for (const std::string& n : f.names)
      if (n == type) return &f;
  return nullptr;
}

const ModelFamily& family(const std::string& type) {
  const ModelFamily* f = find_family(type);
  if (!f) fail("model.type '{}' is not known: use {}", type, join_or(model_type_names()));
  return *f;
}

RnnCell rnn_cell(const std::string& type) { return family(type).cell(type); }

std::string family_names_where(const std::function<bool(const ModelFamily&)>& pick) {
  std::vector<std::string> names;
  for (const ModelFamily& f : model_families())
    if (pick(f)) names.insert(names.end(), f.names.begin(), f.names.end());
  return join_or(names);
}

std::string resolve_type(const std::string& type, const DataShape& shape) {
  const ModelFamily& f = family(type);
  if (shape.vocab <= 0 || !f.text_becomes_lm) return type;
  const RnnCell cell = f.cell(type);
  for (const ModelFamily& lm : model_families())
    for (size_t i = 0; lm.is_language_model && i < lm.cells.size(); ++i)
      if (lm.cells[i] == cell) return lm.names[i];
  fail("model.type '{}': no language model family has its RNN cell", type);
}

ModelSpec refit_spec(const ModelSpec& spec, const DataShape& shape) {
  ModelSpec s = spec;
  family(s.type).fit_shape(s, shape);
  return s;
}

std::optional<ModelSpec> spec_from_weights(const WeightShapes& weights, const std::string& file) {
  for (const ModelFamily& f : model_families())
    if (f.from_weights)
      if (std::optional<ModelSpec> s = f.from_weights(weights, file)) return s;
  return std::nullopt;
}

namespace {
// Calls v(key, member) once per ModelSpec field; M is ModelSpec or const ModelSpec, so one list
// serves spec_to_json and spec_from_json.
template <typename M, typename V>
void visit_spec(M& s, V&& v) {
  v("type", s.type);
  v("input_size", s.input_size);
  v("lookback", s.lookback);
  v("hidden", s.hidden);
  v("layers", s.layers);
  v("bidirectional", s.bidirectional);
  v("dropout", s.dropout);
  v("output_size", s.output_size);
  v("rnn_impl", s.rnn_impl);
  v("grad_checkpoint", s.grad_checkpoint);
  v("autotune", s.autotune);
  v("vocab_size", s.vocab_size);
  v("embed_size", s.embed_size);
  v("heads", s.heads);
  v("bias", s.bias);
  v("decay", s.decay);
  v("backend", s.backend);
  v("residual_to", s.residual_to);
  v("residual_period", s.residual_period);
  v("residual_inputs", s.residual_inputs);
  v("quantile_levels", s.quantile_levels);
  v("future_steps", s.future_steps);
  v("positions", s.positions);
  v("pooling", s.pooling);
  v("patch_size", s.patch_size);
  v("kernel_sizes", s.kernel_sizes);
  v("norm", s.norm);
  v("reconstruct", s.reconstruct);
  v("mask_fill", s.mask_fill);
  v("std_penalty", s.std_penalty);
}
}  // namespace

nlohmann::json spec_to_json(const ModelSpec& s) {
  nlohmann::json j = nlohmann::json::object();
  visit_spec(s, [&](const char* key, const auto& x) { j[key] = x; });
  return j;
}

// Missing fields keep ModelSpec's defaults, so specs written before a field existed still load;
// fields no longer in ModelSpec are ignored ("precision": older versions wrote runtime.precision
// here, which is now the run's policy, backend/precision.h, read from the run's config).
ModelSpec spec_from_json(const nlohmann::json& j) {
  ST_CHECK(j.is_object() && j.contains("type") && j.at("type").is_string(),
           "model_spec must be an object with a \"type\" string, got {}", j.dump());
  ModelSpec s;
  try {
    visit_spec(s, [&](const char* key, auto& x) { x = j.value(key, x); });
  } catch (const nlohmann::json::exception& e) {
    fail("model_spec {}: a field has the wrong type ({})", j.dump(), e.what());
  }
  family(s.type);  // an unknown type fails here, listing the registered ones
  return s;
}

std::unique_ptr<Model> build_model(const ModelSpec& spec, const ModelEnv& env) { return family(spec.type).build(spec, env); }

TextGenerator& text_generator(Model& model) {
  const std::string& type = model.spec().type;
  const ModelFamily& f = family(type);
  TextGenerator* g = f.generates_text ? model.as_text_generator() : nullptr;
  ST_CHECK(g != nullptr, "model.type '{}' ({}) does not generate text: generate needs a checkpoint of a {} run", type,
           f.title, family_names_where([](const ModelFamily& x) { return x.generates_text; }));
  return *g;
}

}  // namespace seqtrain
