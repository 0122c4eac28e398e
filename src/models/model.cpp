#include "models/model.h"

#include "models/char_lm.h"
#include "models/forecaster.h"
#include "models/mlp.h"

namespace seqtrain {

std::unique_ptr<Model> make_model(const ModelSpec& spec) {
  if ((spec.type == "lstm" || spec.type == "gru") && spec.vocab > 0) return std::make_unique<CharLM>(spec);
  if (spec.type == "lstm" || spec.type == "gru") return std::make_unique<Forecaster>(spec);
  if (spec.type == "mlp") return std::make_unique<MlpForecaster>(spec);
  fail("model.type '{}' is not known: use lstm, gru or mlp", spec.type);
}

}  // namespace seqtrain
