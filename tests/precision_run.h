// The mixed-precision training check shared by the bf16 and fp16 suites: a W1-shaped problem
// (LSTM, 2 layers, 8 features, 1 output) scaled down for test time, and 300 AdamW steps over
// the same batches from the same initial weights in a given precision.
#pragma once
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "models/forecaster.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

namespace seqtrain::testing {

struct PrecisionProblem {
  static constexpr int64_t B = 32, T = 30, C = 8, OUT = 1, batches = 20;
  std::vector<float> X, Y, init;

  static ModelSpec spec() { return ModelSpec{"lstm", C, T, 32, 2, false, 0.f, OUT}; }

  // A learnable signal plus noise, like real series: runs settle near the noise floor.
  static PrecisionProblem make() {
    PrecisionProblem p;
    Rng rng(9);
    p.X.resize(batches * B * T * C);
    p.Y.resize(batches * B);
    for (auto& v : p.X) v = rng.normal();
    for (int64_t s = 0; s < batches * B; ++s) {
      double acc = 0;
      for (int64_t t = 0; t < T; ++t) acc += p.X[(s * T + t) * C + t % C] * (t + 1) / T;
      p.Y[s] = static_cast<float>(std::tanh(0.5 * acc) + 0.3 * rng.normal());
    }
    Forecaster m(spec());
    Rng wr(4);
    m.init(wr);
    p.init.assign(m.params().params(), m.params().params() + m.params().size());
    return p;
  }

  // 300 steps in `precision`; every step's loss into *losses; returns the mean loss of the last
  // 50 (one step's loss depends on which batch it saw). scaler: dynamic loss scaling (fp16).
  double train_300(const std::string& precision, std::vector<double>* losses, LossScaler* scaler = nullptr) const {
    Forecaster model(spec(), ModelEnv{.precision = resolve_precision(precision)});
    std::memcpy(model.params().params(), init.data(), init.size() * sizeof(float));
    auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 3e-3});
    ScheduleOptions so;
    so.base_lr = 3e-3;
    auto sched = make_schedule(so);
    TrainStep step(model, *opt, *sched, StepOptions{LossKind::mse, {}, 1.0, 1, scaler});
    double tail = 0;
    for (int64_t i = 0; i < 300; ++i) {
      const int64_t b = i % batches;
      step.run(Tensor(const_cast<float*>(X.data()) + b * B * T * C, {B, T, C}),
               Tensor(const_cast<float*>(Y.data()) + b * B * OUT, {B, OUT}), 0);
      const double l = step.take_loss();
      losses->push_back(l);
      if (i >= 300 - 50) tail += l / 50;
    }
    return tail;
  }
};

}  // namespace seqtrain::testing
