// Objective: what a run minimises, reported as a loss SUM and the COUNT of targets it counted
// (Marian's RationalLoss) rather than as a mean. Why: a mean per micro-batch cannot be averaged
// correctly once micro-batches count different numbers of targets (an epoch's short last batch,
// padded or masked positions, several ranks); sums and counts simply add, and one division at
// the end (TrainStep's accumulation boundary, evaluate()'s last line) gives the exact mean.
// Metrics that are counts too (correct predictions for accuracy) travel with them.
//
// The value per target is today's loss convention: regression counts every element of
// [B, outputs] (so mse's sum / count is torch's MSELoss mean), classification one label per
// sample, next-token prediction one label per position (F.cross_entropy over B*T rows).
// Targets equal to ignore_index are not counted and get no gradient.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "core/batch.h"
#include "core/tensor.h"
#include "nn/loss.h"

namespace seqtrain {

struct DataPlan;

// Sums over counted targets; add them up across micro-batches or batches, divide once.
struct ObjectiveSum {
  double loss = 0;      // sum of the per-target losses
  int64_t count = 0;    // targets counted
  int64_t correct = 0;  // classification: counted targets whose largest logit is the label

  ObjectiveSum& operator+=(const ObjectiveSum& o) {
    loss += o.loss;
    count += o.count;
    correct += o.correct;
    return *this;
  }
  double mean() const { return count ? loss / static_cast<double>(count) : 0.0; }
  double accuracy() const { return count ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
};

enum class ObjectiveTask : uint8_t {
  forecast,    // regression on [B, outputs] f32 targets (mse, mae, huber, quantile): a window's future
  classify,    // one class label per sample: logits [B, C], labels [B]
  regress,     // one vector per sample: [B, targets] f32 (npy y [N, targets]), the same losses as forecast
  next_token,  // one label per position: logits [B, T, V], labels [B, T]
  masked_pretrain,  // reconstruction [B, T, F] of the inputs, scored (mse) where batch.loss_mask is 1
};
const char* task_name(ObjectiveTask task);

// Like Marian's criterion, an objective sees the whole batch beside the model's prediction: its
// targets (typed by the loader: f32 values or int64 labels) and whatever says which of them count
// (lengths, the loss mask). Every method reads batch.targets; a batch without targets is an error.
class Objective {
 public:
  virtual ~Objective() = default;
  virtual std::string_view name() const = 0;  // "forecast/mse", "classify/cross_entropy", ...
  virtual ObjectiveTask task() const = 0;
  // Whether ObjectiveSum::correct means anything (classification tasks).
  virtual bool has_accuracy() const { return false; }
  // Whether forward, backward and accumulate run as host loops over the batch's values (masked
  // pretraining, for now): a captured step (train/step_graphs.h) cannot hold such a loss.
  virtual bool host_loops() const { return false; }

  // Loss sum, count and metrics of one batch.
  virtual ObjectiveSum forward(const Tensor& pred, const Batch& batch) const = 0;
  // Writes scale * d(loss sum)/d(pred) into dpred (overwrites it; dpred is shaped like pred).
  // targets_checked: count() has checked these targets on the host (a device then reads no
  // check back).
  virtual void backward(const Tensor& pred, const Batch& batch, Tensor dpred, double scale,
                        bool targets_checked = false) const = 0;

  // The training step's path, which reads nothing back per batch (TrainStep): count() is
  // forward()'s count from the batch as the host still holds it (checking its targets as forward
  // would), accumulate() adds forward()'s loss sum into acc[0] and its correct count into acc[1],
  // doubles in the model's backend memory, read once per log interval. Call count() first:
  // accumulate() relies on its check of the targets and does not read one back.
  virtual int64_t count(const Tensor& pred, const Batch& host_batch) const = 0;
  virtual void accumulate(const Tensor& pred, const Batch& batch, double* acc) const = 0;
};

// The objective of a loss and a task. Refuses a regression loss for a classification task and
// cross_entropy for forecasting or regression, naming train.loss.
std::unique_ptr<Objective> make_objective(LossKind loss, const LossOptions& options, ObjectiveTask task);
// The task a run trains: train.task, or (auto) what the data holds: class labels (plan.classes >
// 0) one per sample, next tokens for a language model (plan.vocab > 0), else forecast. Error
// naming train.task when the data cannot serve the one asked for (classify with float y, regress
// with labels or windows, next_token without text, forecast with labels).
ObjectiveTask resolve_task(const Config& config, const DataPlan& plan);
// From the config (train.loss, train.huber_delta, train.quantiles) and resolve_task().
std::unique_ptr<Objective> make_objective(const Config& config, const DataPlan& plan);
// The same from the parts evaluate() and the CLI have: the train section and the data's facts
// (classes > 0 means labels; with y_size > 1 labels they are next-token targets), for a run whose
// train.task is resolved the same way.
std::unique_ptr<Objective> make_objective(const TrainConfig& train, int64_t classes, int64_t y_size);
// The loss's options from the train section: train.huber_delta, train.quantiles.
LossOptions loss_options(const TrainConfig& train);

}  // namespace seqtrain
