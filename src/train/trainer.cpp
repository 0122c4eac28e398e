#include "train/trainer.h"

#include "backend/cpu/autotune.h"
#include "backend/cpu/isa.h"

#include "data/augment.h"
#include "data/loader.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "backend/cpu/dnnl_context.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"
#include "nn/loss.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/resume.h"
#include "train/step.h"
#include "train/stop_token.h"
#include "train/train_loop.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
LossOptions loss_options(double huber_delta) {
  LossOptions o;
  o.huber_delta = static_cast<float>(huber_delta);
  return o;
}

}  // namespace

double last_value_baseline(const Dataset& data, const WindowDataset& split) {
  std::vector<int64_t> target_in_x;
  for (const auto& t : data.targets) {
    auto it = std::find(data.features.begin(), data.features.end(), t);
    if (it == data.features.end()) return 0.0;
    target_in_x.push_back(it - data.features.begin());
  }
  std::vector<float> x(split.x_size()), y(split.y_size());
  double sum = 0;
  int64_t count = 0;
  for (int64_t k = 0; k < split.size(); ++k) {
    split.fill_batch(k, 1, x.data(), y.data());
    for (int64_t h = 0; h < split.horizon(); ++h)
      for (size_t t = 0; t < target_in_x.size(); ++t) {
        double pred = x[(split.lookback() - 1) * split.n_features() + target_in_x[t]];
        double err = pred - y[h * target_in_x.size() + t];
        sum += err * err;
        ++count;
      }
  }
  return count ? sum / count : 0.0;
}

StopToken& signal_stop_token() {
  static StopToken token;
  return token;
}

void route_stop_signals() {
  // Why not a sigaction handler: oneDNN 2.6's JIT sgemm kernels point rsp into the heap while
  // they run (oneDNN issue #4845, fixed upstream in 2026), so a handler that interrupts one
  // pushes its frame onto the heap and corrupts it. Blocked signals are never delivered
  // asynchronously; the watcher thread takes them with sigwait on its own stack instead.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started from now on
  std::thread([set] {
    StopToken& token = signal_stop_token();
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (token.armed() && !token.requested()) {  // train() stops after this step
        token.request(sig);
        continue;
      }
      // No training is listening, or this is the second signal: end the process the way the
      // signal's default action would.
      ::signal(sig, SIG_DFL);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      ::raise(sig);
      ::_exit(128 + sig);
    }
  }).detach();
}

ModelSpec model_spec(const Config& c, const Dataset& data) {
  return model_spec(c, data.n_features(), c.data.lookback, c.data.horizon * data.n_targets());
}

ModelSpec model_spec(const Config& c, const DataPlan& plan) {
  ModelSpec s = model_spec(c, plan.features, plan.steps, plan.outputs);
  if (plan.vocab > 0) {
    // data.source text: an RNN type means the char LM over the text's vocabulary.
    if (s.type == "lstm" || s.type == "gru") s.type = "char_" + s.type;
    s.vocab_size = plan.vocab;
  }
  return s;
}

ModelSpec model_spec(const Config& c, int64_t input_size, int64_t lookback, int64_t output_size) {
  ModelSpec s;
  s.type = c.model.type;
  s.input_size = input_size;
  s.lookback = lookback;
  s.hidden = c.model.hidden;
  s.layers = c.model.layers;
  s.bidirectional = c.model.bidirectional;
  s.dropout = static_cast<float>(c.model.dropout);
  s.output_size = output_size;
  s.rnn_impl = c.runtime.rnn_impl;
  s.precision = c.runtime.precision;
  s.grad_checkpoint = c.train.grad_checkpoint;
  // Timing-based choices can differ between two runs of the same config: a deterministic run
  // keeps the configured kernels. (A resumed run reuses its autotune.json either way.)
  s.autotune = c.runtime.autotune && !c.runtime.deterministic;
  s.embed_size = c.model.embed_size;
  return s;
}

double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size) {
  if (split.empty()) return 0.0;
  return evaluate(model, WindowSource(split), split.lookback(), split.n_features(), 0, loss, huber_delta, batch_size);
}

void forward_batches(Model& model, const BatchSource& source, int64_t steps, int64_t features, int64_t batch_size,
                     const std::function<void(int64_t first, int64_t n, const Tensor& pred, float* y)>& use) {
  Arena arena;
  std::vector<float> x(batch_size * source.x_size()), y(batch_size * source.y_size());
  std::vector<int64_t> idx(batch_size);
  for (int64_t b = 0; b < source.size(); b += batch_size) {
    const int64_t n = std::min(batch_size, source.size() - b);
    for (int64_t i = 0; i < n; ++i) idx[i] = b + i;
    source.fill(std::span<const int64_t>(idx.data(), n), 0, x.data(), y.empty() ? nullptr : y.data());
    arena.reset();
    Tensor pred = model.forward(Tensor(x.data(), {n, steps, features}), arena, false);
    use(b, n, pred, y.empty() ? nullptr : y.data());
  }
}

double evaluate(Model& model, const BatchSource& split, int64_t steps, int64_t features, int64_t classes,
                const std::string& loss, double huber_delta, int64_t batch_size, double* accuracy) {
  if (split.size() == 0) return 0.0;
  const LossKind kind = parse_loss(loss);
  std::vector<int64_t> labels(classes > 0 ? batch_size * split.y_size() : 0);
  double sum = 0;
  int64_t correct = 0;
  forward_batches(model, split, steps, features, batch_size, [&](int64_t, int64_t n, const Tensor& pred, float* y) {
    Tensor target(y, {n, split.y_size()});
    if (classes > 0) {  // one label per sample ([n]) or per step ([n, T], next-token targets)
      const int64_t rows = n * split.y_size();
      for (int64_t i = 0; i < rows; ++i) labels[i] = static_cast<int64_t>(y[i]);
      target = split.y_size() == 1 ? Tensor(labels.data(), {n}, DType::i64)
                                   : Tensor(labels.data(), {n, split.y_size()}, DType::i64);
      const float* logits = pred.f32();
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = logits + i * classes;
        correct += std::max_element(row, row + classes) - row == labels[i];
      }
    }
    sum += n * static_cast<double>(loss_forward(kind, pred, target, loss_options(huber_delta)));
  });
  if (accuracy) *accuracy = static_cast<double>(correct) / static_cast<double>(split.size() * split.y_size());
  return sum / static_cast<double>(split.size());
}

TrainSummary train(const Config& config, const TrainOptions& options) {
  TrainLoop loop(config, options);
  return loop.run();
}

}  // namespace seqtrain
