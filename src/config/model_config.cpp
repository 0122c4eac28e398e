// The model section through the registry: see model_config.h.
#include "config/model_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda_plugin.h"
#include "data/sources.h"

namespace seqtrain {
namespace {
// model.pooling with auto resolved to the family's own (mean for cnn, last elsewhere).
std::string pooling_of(const Config& c) {
  return c.model.pooling == "auto" ? family(c.model.type).default_pooling : c.model.pooling;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace

std::optional<ConfigProblem> check_model_config(const Config& c) {
  const ModelFamily& f = family(c.model.type);
  if (!f.convolutional && c.model.kernel_sizes != ModelConfig{}.kernel_sizes)
    return ConfigProblem{"model.kernel_sizes",
                         fmt::format("config key 'model.kernel_sizes' is {}, but model.type {} has no convolutions "
                                     "(only {} does): remove model.kernel_sizes, or set model.type cnn",
                                     list_text(c.model.kernel_sizes), c.model.type,
                                     family_names_where([](const ModelFamily& m) { return m.convolutional; }))};
  if (!f.convolutional && c.model.norm != ModelConfig{}.norm)
    return ConfigProblem{"model.norm",
                         fmt::format("config key 'model.norm' is {}, but model.type {} has no norm to choose (only {} "
                                     "does): remove model.norm (or set it to layer), or set model.type cnn",
                                     c.model.norm, c.model.type,
                                     family_names_where([](const ModelFamily& m) { return m.convolutional; }))};
  if (f.check_settings) {
    ModelSpec settings;
    settings.hidden = c.model.hidden;
    settings.heads = c.model.heads;
    settings.layers = c.model.layers;
    settings.positions = c.model.positions;
    settings.pooling = pooling_of(c);
    settings.patch_size = c.model.patch_size;
    settings.bidirectional = c.model.bidirectional;
    settings.kernel_sizes = c.model.kernel_sizes;
    if (auto p = f.check_settings(settings)) return ConfigProblem{p->first, p->second};
  }
  if (c.train.task == "masked_pretrain") {
    if (!f.pretrains)
      return ConfigProblem{"train.task", fmt::format("config key 'train.task' is masked_pretrain, which needs an encoder "
                                                     "of float sequences, but model.type is {}: use {}", c.model.type,
                                                     family_names_where([](const ModelFamily& m) { return m.pretrains; }))};
    if (c.model.pooling == "cls")
      return ConfigProblem{"model.pooling", "config key 'model.pooling' is cls, which masked pretraining does not train "
                                            "(the decoder reads every step, never a cls token): use mean or last, in "
                                            "pretraining and in the fine-tuning that starts from it"};
  }
  if (!is_text(c.data) || f.reads_text()) return std::nullopt;
  return ConfigProblem{"model.type",
                       fmt::format("config key 'model.type' is {}, but data.source text needs the char LM ({})",
                                   c.model.type, family_names_where([](const ModelFamily& m) { return m.text_becomes_lm; }))};
}

ModelSpec spec_from_config(const Config& c, const DataShape& shape) {
  ModelSpec s;
  s.type = resolve_type(c.model.type, shape);
  s.hidden = c.model.hidden;
  s.layers = c.model.layers;
  s.bidirectional = c.model.bidirectional;
  s.dropout = static_cast<float>(c.model.dropout);
  s.rnn_impl = c.runtime.rnn_impl;
  s.backend = backend_for(c.runtime.backend, c.runtime.device);
  s.grad_checkpoint = c.train.grad_checkpoint;
  // Timing-based choices can differ between two runs of the same config: a deterministic run
  // keeps the configured kernels. (A resumed run reuses its autotune.json either way.)
  s.autotune = c.runtime.autotune && !c.runtime.deterministic;
  s.embed_size = c.model.embed_size;
  s.heads = c.model.heads;
  s.bias = c.model.bias;
  s.decay = c.train.optimizer.decay;
  s.residual_to = c.model.residual_to;
  if (s.residual_to == "seasonal_naive" && !c.data.seasons.empty())
    s.residual_period = *std::max_element(c.data.seasons.begin(), c.data.seasons.end());
  if (s.residual_to != "none") s.residual_inputs = shape.target_inputs;
  s.quantile_levels = quantile_levels(c.train);
  s.positions = c.model.positions;
  s.pooling = pooling_of(c);
  s.patch_size = c.model.patch_size;
  s.kernel_sizes = c.model.kernel_sizes;
  s.norm = c.model.norm;
  s.reconstruct = c.train.task == "masked_pretrain";
  s.mask_fill = c.train.masking.fill;
  s.std_penalty = static_cast<float>(c.train.masking.std_penalty);
  return refit_spec(s, shape);
}

}  // namespace seqtrain
