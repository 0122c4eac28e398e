// The benchmarks' training step: a model from a ModelSpec, initialised from Rng(42), with
// AdamW (lr 1e-3, constant schedule), MSE and global-norm clipping at 1, in a given precision
// policy (fp32 by default) — what bench_step times and what bench_loader feeds. The members are declared in the order they must be
// built: the step refers to the model, optimizer and schedule.
#pragma once
#include <memory>

#include "backend/autotune.h"
#include "core/rng.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

namespace seqtrain::bench {

struct BenchModel {
  std::shared_ptr<Autotuner> tuner;  // lent to the model when spec.autotune, as the training loop does
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LrSchedule> sched;
  std::unique_ptr<TrainStep> step;

  explicit BenchModel(const ModelSpec& spec, const Precision& precision = {})
      : tuner(spec.autotune ? std::make_shared<Autotuner>() : nullptr),
        model(make_model(spec, ModelEnv{tuner, precision})),
        opt(make_optimizer(OptimizerOptions{.name = "adamw", .lr = 1e-3})),
        sched(make_schedule(ScheduleOptions{.name = "constant", .base_lr = 1e-3})) {
    Rng rng(42);
    model->init(rng);
    StepOptions so;
    so.loss = LossKind::mse;
    so.grad_clip = 1.0;
    step = std::make_unique<TrainStep>(*model, *opt, *sched, so);
  }
};

}  // namespace seqtrain::bench
