#include "models/model.h"

#include "models/registry.h"

namespace seqtrain {

RnnOptions rnn_options(const ModelSpec& spec, std::string* note) {
  RnnOptions o;
  o.impl = parse_rnn_impl(spec.rnn_impl);
  o.precision = rnn_precision(spec.precision, note);
  o.grad_checkpoint = spec.grad_checkpoint;
  o.autotune = spec.autotune;
  return o;
}

std::unique_ptr<Model> make_model(const ModelSpec& spec) { return build_model(spec); }

}  // namespace seqtrain
