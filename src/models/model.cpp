#include "models/model.h"

#include "models/registry.h"

namespace seqtrain {

RnnOptions rnn_options(const ModelSpec& spec, const ModelEnv& env) {
  RnnOptions o;
  o.impl = spec.rnn_impl;
  o.precision = env.precision;
  o.grad_checkpoint = spec.grad_checkpoint;
  o.autotune = spec.autotune;
  if (spec.autotune) o.autotuner = env.autotuner;
  return o;
}

void apply_decay_policy(ParamStore& params, const std::string& policy) {
  ST_CHECK(policy == "all" || policy == "matrices" || policy == "2d",
           "train.optimizer.decay '{}' is not known: use all (every parameter), 2d (every tensor of 2+ dimensions, "
           "embeddings included, as nanoGPT) or matrices (2+ dimensions except embeddings, as minGPT)", policy);
  const auto& entries = params.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const bool matrix = entries[i].shape.size() >= 2;
    params.set_decay(i, policy == "all" || (policy == "2d" && matrix) || (matrix && !entries[i].embedding));
  }
}

void Model::finish_params() {
  params_.finalize();
  apply_decay_policy(params_, spec_.decay);
}

Tensor Model::embed(const Batch&, StepContext&) {
  fail("model.type '{}' has no encoder whose pooled output could be embedded: only lstm, gru and transformer models "
       "(and their masked pretraining) have one", spec_.type);
}

void Model::init(Rng& rng) {
  ParamStore::HostParams host(params_);
  init_params(rng);
  host.commit();
}

std::unique_ptr<Model> make_model(const ModelSpec& spec, const ModelEnv& env) { return build_model(spec, env); }

}  // namespace seqtrain
