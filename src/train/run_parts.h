// The parts of a training run that its config decides, built in one place for every caller
// that trains: the training loop, the batch-size finder's probe (train/batch_finder.h) and the LR
// range test (train/lr_finder.h). Why one place: a probe that builds its optimizer or step a
// little differently from the run measures another run, and the LR test must try the run's own
// optimizer, clipping and loss scaling.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/precision.h"
#include "config/config.h"
#include "models/model.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/step.h"

namespace seqtrain {

// A fresh model of `spec`, initialised from the config's seed; with `load_weights`, then filled
// as model.init_from / model.encoder_from say (reading those files, never writing them). Each
// line the filling logs is appended to *notes when given.
std::unique_ptr<Model> build_run_model(const Config& config, const ModelSpec& spec, const ModelEnv& env,
                                       bool load_weights, std::vector<std::string>* notes = nullptr);

// train.optimizer on the model's backend, with the model's weight-decay mask.
std::unique_ptr<Optimizer> build_run_optimizer(const TrainConfig& train, Model& model);

// The dynamic loss scaler the precision policy asks for (fp16), from runtime.loss_scale; null
// otherwise.
std::unique_ptr<LossScaler> build_loss_scaler(const Config& config, const Precision& precision);

// The overlap's bucket size in values: SEQTRAIN_MPI_BUCKET_KB (default 256; 0: no overlap).
size_t gradient_bucket_values();

// train.loss, clipping, accumulation; the scaler, ranks and objective lent (may be null).
StepOptions run_step_options(const TrainConfig& train, LossScaler* scaler, Communicator* comm,
                             const Objective* objective);

}  // namespace seqtrain
