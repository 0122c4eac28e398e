#include "models/model.h"

#include "models/char_lm.h"
#include "models/forecaster.h"
#include "models/mlp.h"

namespace seqtrain {

std::unique_ptr<Model> make_model(const ModelSpec& spec) {
  if (spec.type == "lstm" || spec.type == "gru") return std::make_unique<Forecaster>(spec);
  if (spec.type == "mlp") return std::make_unique<MlpForecaster>(spec);
  if (spec.type == "char_lstm" || spec.type == "char_gru") return std::make_unique<CharLm>(spec);
  fail("model.type '{}' is not known: use lstm, gru, mlp, char_lstm or char_gru", spec.type);
}

}  // namespace seqtrain
