// GraphRun: one model trained through TrainStep with runtime.cuda_graphs on or off, for the
// capture tests (test_step_graphs.cpp on the recording CaptureBackend, test_cuda_graphs.cpp on a
// GPU). A warmup + cosine schedule gives every update another learning rate (and AdamW's bias
// corrections move each step too), and the clipping threshold is small enough to clip: a capture
// that kept any of its own per-step values replays other numbers than the uncaptured run.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"
#include "data/batch_layout.h"
#include "data/batch_source.h"
#include "data/loader.h"
#include "models/model.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {

struct GraphSetup {
  ModelSpec spec;
  bool graphs = true;
  std::string optimizer = "adamw";
  int64_t grad_accum = 1;
  // fp16's dynamic loss scaling.
  std::optional<LossScalerOptions> loss_scale{};
  float target_scale = 1.f;  // regression targets times this (large ones overflow a large scale)
  bool copy_lane = true;     // StepOptions::copy_lane
};

struct GraphRun {
  std::shared_ptr<Backend> owned;  // first, so it outlives everything built on it (a test's own backend)
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LrSchedule> sched;
  std::unique_ptr<LossScaler> scaler;  // before the step, which uses it until its end
  std::unique_ptr<TrainStep> step;
  // Shared with the step's note callback, so it stays put when the run is moved.
  std::shared_ptr<std::vector<std::string>> notes = std::make_shared<std::vector<std::string>>();
  std::vector<double> losses, norms;
  std::vector<float> scales;  // with a loss scaler: its scale after each step
  float target_scale = 1.f;
};

// Forecasters of two layers with two outputs: a small MLP and an LSTM, the specs the capture
// tests share.
inline ModelSpec graph_forecaster(const char* type, int64_t inputs, int64_t lookback, int64_t hidden) {
  ModelSpec s;
  s.type = type;
  s.input_size = inputs;
  s.lookback = lookback;
  s.hidden = hidden;
  s.layers = 2;
  s.output_size = 2;
  return s;
}
inline ModelSpec graph_mlp() { return graph_forecaster("mlp", 3, 6, 8); }
inline ModelSpec graph_lstm() { return graph_forecaster("lstm", 4, 24, 32); }

inline GraphRun graph_run(Backend& backend, const GraphSetup& s) {
  GraphRun r;
  ModelEnv env;
  env.backend = &backend;
  r.model = make_model(s.spec, env);
  Rng init(7);
  r.model->init(init);
  r.target_scale = s.target_scale;
  r.opt = make_optimizer(OptimizerOptions{.name = s.optimizer, .lr = 3e-3}, backend);
  r.opt->set_decay_mask(r.model->params().decay_mask());
  r.sched = make_schedule(ScheduleOptions{.name = "cosine", .base_lr = 3e-3, .warmup_steps = 3, .total_steps = 40});
  StepOptions so;
  if (s.spec.vocab_size > 0) so.loss = LossKind::cross_entropy;
  so.grad_clip = 0.05;
  so.grad_accum = s.grad_accum;
  so.graphs = s.graphs;
  so.copy_lane = s.copy_lane;
  so.note = [notes = r.notes](const std::string& line) { notes->push_back(line); };
  if (s.loss_scale) {
    r.scaler = std::make_unique<LossScaler>(*s.loss_scale);
    so.scaler = r.scaler.get();
  }
  r.step = std::make_unique<TrainStep>(*r.model, *r.opt, *r.sched, so);
  return r;
}

// Step s: `rows` samples from Rng(100 + s), then the loss and gradient norm read (a log interval
// of one step) unless `read` is false. A language model's targets may ignore their first position
// (the batch then counts fewer targets than its shape holds).
inline void graph_step(GraphRun& r, int64_t s, int64_t rows, bool ignore_one = false, bool read = true) {
  const ModelSpec& spec = r.model->spec();
  Rng rng(100 + static_cast<uint64_t>(s));
  if (spec.vocab_size > 0) {
    const int64_t T = spec.lookback;
    std::vector<float> x(rows * T);
    std::vector<int64_t> y(rows * T);
    random_token_batch(rng, spec.vocab_size, x, y);
    if (ignore_one) y[0] = -100;
    r.step->run(Tensor(x.data(), {rows, T}), Tensor(y.data(), {rows, T}, DType::i64), static_cast<uint64_t>(s));
  } else {
    std::vector<float> x(rows * spec.lookback * spec.input_size), y(rows * spec.output_size);
    for (auto& v : x) v = rng.uniform(-1.f, 1.f);
    for (auto& v : y) v = rng.uniform(-1.f, 1.f) * r.target_scale;
    r.step->run(Tensor(x.data(), {rows, spec.lookback, spec.input_size}), Tensor(y.data(), {rows, spec.output_size}),
                static_cast<uint64_t>(s));
  }
  if (!read) return;
  r.losses.push_back(r.step->take_loss());
  r.norms.push_back(r.step->grad_norm());
  if (r.scaler) r.scales.push_back(r.scaler->scale());
}

// `epochs` epochs of 4 full batches of `rows` and a short last batch of rows - 1.
inline void graph_epochs(GraphRun& r, int epochs, int64_t rows) {
  int64_t s = 0;
  for (int e = 0; e < epochs; ++e) {
    for (int b = 0; b < 4; ++b) graph_step(r, s++, rows);
    graph_step(r, s++, rows - 1);
  }
}

// Samples of a forecaster whose values depend only on (index, epoch), for runs fed by a Loader.
// on_fill, when set, sees each slot buffer before the source writes it (from the loader's workers).
class NoiseSource final : public BatchSource {
 public:
  NoiseSource(int64_t size, int64_t x_size, int64_t y_size) : size_(size), x_size_(x_size), y_size_(y_size) {}
  int64_t size() const override { return size_; }
  int64_t x_size() const override { return x_size_; }
  int64_t y_size() const override { return y_size_; }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override {
    if (on_fill) on_fill(x, idx.size() * static_cast<size_t>(x_size_) * sizeof(float));
    for (size_t i = 0; i < idx.size(); ++i) {
      Rng rng(static_cast<uint64_t>(idx[i]) * 1000003u + static_cast<uint64_t>(epoch));
      for (int64_t j = 0; j < x_size_; ++j) x[static_cast<int64_t>(i) * x_size_ + j] = rng.uniform(-1.f, 1.f);
      for (int64_t j = 0; j < y_size_; ++j) y[static_cast<int64_t>(i) * y_size_ + j] = rng.uniform(-1.f, 1.f);
    }
  }
  std::function<void(const float* x, size_t bytes)> on_fill;

 private:
  int64_t size_, x_size_, y_size_;
};

// `epochs` shuffled epochs of `source` in batches of `batch` through r's step, from a Loader with
// `workers` threads whose slots come from the backend's pinned_allocator() (page-locked on a GPU),
// as a training run's; the loss and gradient norm read every `log_every` steps.
inline void loader_epochs(GraphRun& r, const BatchSource& source, int epochs, int64_t batch, int64_t workers,
                          int64_t log_every) {
  const ModelSpec& spec = r.model->spec();
  Loader loader(source, LoaderOptions{.workers = workers, .batch_size = batch, .shuffle = true, .seed = 5,
                                      .allocator = r.model->params().backend().pinned_allocator(),
                                      .layout = sample_layout(spec.lookback, spec.input_size, false, false,
                                                              spec.output_size)});
  int64_t s = 0;
  for (int e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    while (const Batch* b = loader.next()) {
      r.step->run(*b, static_cast<uint64_t>(s));
      loader.release(b);
      if (++s % log_every != 0) continue;
      r.losses.push_back(r.step->take_loss());
      r.norms.push_back(r.step->grad_norm());
    }
  }
}

inline std::string graph_notes(const GraphRun& r) {
  std::string all;
  for (const std::string& n : *r.notes) all += n + "\n";
  return all;
}

inline std::vector<uint64_t> bits(const std::vector<double>& v) {
  std::vector<uint64_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
  return out;
}

// Every step's loss and gradient norm, the weights and AdamW's moments, bit for bit.
inline void expect_same_run(const GraphRun& a, const GraphRun& b) {
  ASSERT_FALSE(a.losses.empty());
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(bits(a.norms), bits(b.norms));  // NaN (no update yet) equal to NaN too
  EXPECT_EQ(a.scales, b.scales);
  std::vector<float> wa(a.model->params().size()), wb(b.model->params().size());
  a.model->params().read_params(wa);
  b.model->params().read_params(wb);
  EXPECT_EQ(wa, wb);
  const OptimizerState x = a.opt->state(), y = b.opt->state();
  EXPECT_EQ(x.step, y.step);
  EXPECT_EQ(x.buffers, y.buffers);
  EXPECT_NE(a.losses.front(), a.losses.back());  // it trained
}

}  // namespace seqtrain::testing
