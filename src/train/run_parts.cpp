// The parts of a training run its config decides: see run_parts.h.
#include "train/run_parts.h"

#include <cstdlib>

#include "core/rng.h"
#include "train/encoder_from.h"
#include "train/init_from.h"

namespace seqtrain {

std::unique_ptr<Model> build_run_model(const Config& config, const ModelSpec& spec, const ModelEnv& env,
                                       bool load_weights, std::vector<std::string>* notes) {
  std::unique_ptr<Model> model = make_model(spec, env);
  Rng init_rng(config.seed, /*stream=*/1);
  model->init(init_rng);
  if (!load_weights) return model;
  if (!config.model.init_from.empty())
    init_from(config.model.init_from, model->params(), init_from_options(config.model));
  if (!config.model.encoder_from.empty()) {  // (config/load.cpp refuses it beside model.init_from)
    const std::string line = encoder_from(config.model.encoder_from, *model).line();
    if (notes) notes->push_back(line);
  }
  return model;
}

std::unique_ptr<Optimizer> build_run_optimizer(const TrainConfig& t, Model& model) {
  auto optimizer = make_optimizer(OptimizerOptions{.name = t.optimizer.name, .lr = t.optimizer.lr,
                                                   .beta1 = t.optimizer.beta1, .beta2 = t.optimizer.beta2,
                                                   .eps = t.optimizer.eps, .weight_decay = t.optimizer.weight_decay,
                                                   .momentum = t.optimizer.momentum,
                                                   .nesterov = t.optimizer.nesterov},
                                  model.params().backend());
  optimizer->set_decay_mask(model.params().decay_mask());  // the model's train.optimizer.decay policy
  return optimizer;
}

std::unique_ptr<LossScaler> build_loss_scaler(const Config& config, const Precision& precision) {
  if (!precision.loss_scaling) return nullptr;
  const LossScaleConfig& ls = config.runtime.loss_scale;
  return std::make_unique<LossScaler>(
      LossScalerOptions{ls.init, ls.growth_factor, ls.backoff_factor, ls.growth_interval});
}

// SEQTRAIN_MPI_BUCKET_KB: the overlap's bucket size (bench/mpi.sh compares; 0 turns it off).
// 256 KB: a few buckets even for a 1 MB gradient, few enough that each is worth a message.
size_t gradient_bucket_values() {
  const char* env = std::getenv("SEQTRAIN_MPI_BUCKET_KB");
  const double kb = env && *env ? std::atof(env) : 256.0;
  return kb > 0 ? static_cast<size_t>(kb * 1024.0 / sizeof(float)) : 0;
}

StepOptions run_step_options(const TrainConfig& t, LossScaler* scaler, Communicator* comm,
                             const Objective* objective) {
  StepOptions so{parse_loss(t.loss), LossOptions{}, t.grad_clip, t.grad_accum, scaler};
  so.loss_options.huber_delta = static_cast<float>(t.huber_delta);
  so.comm = comm;
  so.objective = objective;
  so.zero = t.zero != 0;
  so.bucket = gradient_bucket_values();
  return so;
}

}  // namespace seqtrain
