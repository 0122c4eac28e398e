#include "models/model.h"

#include "models/registry.h"

namespace seqtrain {

RnnOptions rnn_options(const ModelSpec& spec, const ModelEnv& env) {
  RnnOptions o;
  o.impl = parse_rnn_impl(spec.rnn_impl);
  o.precision = rnn_precision(spec.precision);
  o.grad_checkpoint = spec.grad_checkpoint;
  o.autotune = spec.autotune;
  if (spec.autotune) o.autotuner = env.autotuner;
  return o;
}

void apply_decay_policy(ParamStore& params, const std::string& policy) {
  ST_CHECK(policy == "all" || policy == "matrices",
           "train.optimizer.decay '{}' is not known: use all (every parameter) or matrices (weights of 2+ "
           "dimensions except embeddings)", policy);
  const auto& entries = params.entries();
  for (size_t i = 0; i < entries.size(); ++i)
    params.set_decay(i, policy == "all" || (entries[i].shape.size() >= 2 && !entries[i].embedding));
}

void Model::finish_params() {
  params_.finalize();
  apply_decay_policy(params_, spec_.decay);
}

std::unique_ptr<Model> make_model(const ModelSpec& spec, const ModelEnv& env) { return build_model(spec, env); }

}  // namespace seqtrain
