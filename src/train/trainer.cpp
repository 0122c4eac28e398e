#include "train/trainer.h"

#include "backend/device_batch.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "config/model_config.h"
#include "data/loader.h"
#include "train/rank_start.h"
#include "train/stop_token.h"
#include "train/train_loop.h"

namespace seqtrain {
namespace fs = std::filesystem;

double last_value_baseline(const Dataset& data, const WindowDataset& split) {
  const std::vector<int64_t> target_in_x = data.target_feature_indices();
  if (target_in_x.empty()) return 0.0;
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

DataShape window_shape(const Config& c, const Dataset& data) {
  return DataShape{.features = data.n_features(),
                   .steps = data.train.steps(),
                   .outputs = c.data.horizon * data.n_targets() * quantile_levels(c.train),
                   .future_steps = data.train.future_steps(),
                   .target_inputs = data.target_feature_indices()};
}

ModelSpec model_spec(const Config& c, const Dataset& data) { return spec_from_config(c, window_shape(c, data)); }

ModelSpec model_spec(const Config& c, const DataPlan& plan) {
  if (plan.windows) return model_spec(c, *plan.windows);
  return spec_from_config(c, DataShape{plan.features, plan.steps, plan.outputs, plan.vocab, plan.classes});
}

ModelSpec model_spec(const Config& c, int64_t input_size, int64_t lookback, int64_t output_size) {
  return spec_from_config(c, DataShape{input_size, lookback, output_size});
}

double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size) {
  if (split.empty()) return 0.0;
  LossOptions o;  // as make_objective(loss, huber_delta, 0, y_size), on the model's backend
  o.huber_delta = static_cast<float>(huber_delta);
  o.backend = &model.params().backend();
  const auto objective = make_objective(parse_loss(loss), o, ObjectiveTask::forecast);
  return evaluate(model, WindowSource(split), window_layout(split), *objective, batch_size);
}

void forward_batches(Model& model, const BatchSource& source, const SampleLayout& layout, int64_t batch_size,
                     const BatchUse& use, const ModelPass& pass, EvalShard shard) {
  // train.batch_size: auto is a number by the time a run's config is read back (config.yaml).
  ST_CHECK(batch_size >= 1, "internal error: a pass over batches of {} samples (train.batch_size auto unresolved)",
           batch_size);
  Backend& backend = model.params().backend();
  Arena arena(backend);
  BatchBuffers buf;
  buf.reserve(source, batch_size);
  std::vector<int64_t> idx(static_cast<size_t>(batch_size));
  Batch host;
  for (int64_t b = 0; b < source.size(); b += batch_size) {
    const auto [lo, hi] = shard_rows(std::min(batch_size, source.size() - b), shard.rank, shard.world);
    const int64_t n = hi - lo;
    if (n == 0) continue;  // a short last batch with fewer rows than ranks
    for (int64_t i = 0; i < n; ++i) idx[i] = b + lo + i;
    fill_batch(source, layout, std::span<const int64_t>(idx.data(), n), 0, buf, host);
    host.index = b / batch_size;
    arena.reset();
    StepContext ctx(arena);
    ctx.host_batch = &host;
    const Batch batch = device_batch(host, arena, backend);
    Tensor pred = pass ? pass(batch, ctx) : model.forward(batch, ctx);
    use(b + lo, host, batch, pred, arena);
  }
}

ObjectiveSum evaluate_sum(Model& model, const BatchSource& split, const SampleLayout& layout,
                          const Objective& objective, int64_t batch_size, const EvalHook& hook, EvalShard shard) {
  std::vector<float> host_pred;
  ObjectiveSum total;
  Backend& backend = model.params().backend();
  forward_batches(model, split, layout, batch_size,
                  [&](int64_t, const Batch& host, const Batch& device, const Tensor& pred, Arena&) {
    if (hook) {  // before the objective, which may reuse the outputs' memory
      host_pred.resize(static_cast<size_t>(pred.numel()));
      read_floats(backend, pred, host_pred.data());
      hook(host.count, host.x, host.y, host_pred.data());
    }
    total += objective.forward(pred, device);
  }, {}, shard);
  return total;
}

SeriesOf series_of(const WindowDataset* split) {
  if (!split || split->ranges().size() < 2) return {};
  return [split](int64_t k) { return split->series_of(k); };
}

EvalHook scorer_hook(std::optional<ForecastScorer>& scorer) {
  if (!scorer) return {};
  return [&scorer](int64_t n, const float* x, const float* y, const float* p) { scorer->add(n, x, y, p); };
}

double evaluate(Model& model, const BatchSource& split, const SampleLayout& layout, const Objective& objective,
                int64_t batch_size, double* accuracy, const EvalHook& hook) {
  const ObjectiveSum total = evaluate_sum(model, split, layout, objective, batch_size, hook);
  if (accuracy) *accuracy = total.accuracy();
  return total.mean();
}

TrainSummary train(const Config& config, const TrainOptions& options) {
  if (!options.comm || options.comm->world() == 1) {
    TrainLoop loop(config, options);
    return loop.run();
  }
  // Several ranks: each builds its loop (its data, the model), then all agree to start, so a
  // rank that failed, or runs another config or binary, stops every rank with one message
  // before the first collective of the loop (train/rank_start.h).
  std::unique_ptr<TrainLoop> loop;
  std::string error;
  try {
    loop = std::make_unique<TrainLoop>(config, options);
  } catch (const Error& e) {
    error = e.what();
  }
  agree_to_start(*options.comm, error, rank_identity(config_hash(config)));
  return loop->run();
}

}  // namespace seqtrain
