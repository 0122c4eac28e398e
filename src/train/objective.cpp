// Objectives over nn/loss's sum-reduced losses. See objective.h.
#include "train/objective.h"

#include "backend/backend.h"
#include "backend/cuda_plugin.h"
#include "core/error.h"
#include "train/data_plan.h"

namespace seqtrain {
namespace {

// Forecasting: mse / mae / huber over every element of [B, outputs].
class RegressionObjective final : public Objective {
 public:
  RegressionObjective(LossKind kind, const LossOptions& opt) : kind_(kind), opt_(opt), name_("forecast/") {
    name_ += loss_name(kind);
  }
  std::string_view name() const override { return name_; }
  ObjectiveTask task() const override { return ObjectiveTask::forecast; }
  Tensor target(float* y, int64_t n, int64_t y_size, std::vector<int64_t>&) const override {
    return Tensor(y, {n, y_size});
  }
  ObjectiveSum forward(const Tensor& pred, const Tensor& target) const override {
    const LossSum s = loss_sum(kind_, pred, target, opt_);
    return {s.sum, s.count, 0};
  }
  void backward(const Tensor& pred, const Tensor& target, Tensor dpred, double scale, bool) const override {
    loss_sum_backward(kind_, pred, target, dpred, scale, opt_);
  }
  int64_t count(const Tensor& pred, const Tensor& host_target) const override {
    return count_targets(kind_, pred, host_target, opt_);
  }
  void accumulate(const Tensor& pred, const Tensor& target, double* acc) const override {
    loss_sum_accumulate(kind_, pred, target, acc, opt_);
  }

 private:
  LossKind kind_;
  LossOptions opt_;
  std::string name_;
};

// Classification: cross-entropy over one label per sample (logits [B, C], labels [B]), with
// the count of labels whose largest logit is the label (the first largest on ties).
class ClassificationObjective : public Objective {
 public:
  explicit ClassificationObjective(const LossOptions& opt) : opt_(opt) {}
  std::string_view name() const override { return "classify/cross_entropy"; }
  ObjectiveTask task() const override { return ObjectiveTask::classify; }
  bool has_accuracy() const override { return true; }
  Tensor target(float* y, int64_t n, int64_t y_size, std::vector<int64_t>& labels) const override {
    ST_CHECK(static_cast<int64_t>(labels.size()) >= n * y_size,
             "internal error: a label buffer of {} for {} samples of {} labels", labels.size(), n, y_size);
    for (int64_t i = 0; i < n * y_size; ++i) labels[i] = static_cast<int64_t>(y[i]);
    return label_tensor(labels.data(), n, y_size);
  }
  ObjectiveSum forward(const Tensor& pred, const Tensor& target) const override {
    // The op counts the correct rows in its pass over the logits (checks shapes and labels too).
    const LossSum s = loss_sum(LossKind::cross_entropy, pred, target, opt_);
    return {s.sum, s.count, s.correct};
  }
  void backward(const Tensor& pred, const Tensor& target, Tensor dpred, double scale,
                bool targets_checked) const override {
    LossOptions o = opt_;
    o.targets_checked = targets_checked;
    loss_sum_backward(LossKind::cross_entropy, pred, target, dpred, scale, o);
  }
  int64_t count(const Tensor& pred, const Tensor& host_target) const override {
    return count_targets(LossKind::cross_entropy, pred, host_target, opt_);
  }
  void accumulate(const Tensor& pred, const Tensor& target, double* acc) const override {
    LossOptions o = opt_;
    o.targets_checked = true;  // the step called count() on the host batch first
    loss_sum_accumulate(LossKind::cross_entropy, pred, target, acc, o);
  }

 protected:
  virtual Tensor label_tensor(int64_t* labels, int64_t n, int64_t y_size) const {
    ST_CHECK(y_size == 1, "classification takes one label per sample, got {} per sample", y_size);
    return Tensor(labels, {n}, DType::i64);
  }

 private:
  LossOptions opt_;
};

// Next-token prediction: cross-entropy at every position (logits [B, T, V], labels [B, T]),
// each position one counted target, as F.cross_entropy(logits.view(-1, V), y.view(-1)).
class NextTokenObjective final : public ClassificationObjective {
 public:
  using ClassificationObjective::ClassificationObjective;
  std::string_view name() const override { return "next_token/cross_entropy"; }
  ObjectiveTask task() const override { return ObjectiveTask::next_token; }

 protected:
  Tensor label_tensor(int64_t* labels, int64_t n, int64_t y_size) const override {
    return Tensor(labels, {n, y_size}, DType::i64);
  }
};

}  // namespace

std::unique_ptr<Objective> make_objective(LossKind loss, const LossOptions& options, ObjectiveTask task) {
  if (task == ObjectiveTask::forecast) {
    ST_CHECK(loss != LossKind::cross_entropy,
             "train.loss is cross_entropy, which needs class labels, but this data has regression targets; use "
             "mse, mae, huber or quantile");
    return std::make_unique<RegressionObjective>(loss, options);
  }
  ST_CHECK(loss == LossKind::cross_entropy, "train.loss is {} but this data holds class labels ({}); set "
           "train.loss: cross_entropy", loss_name(loss),
           task == ObjectiveTask::classify ? "one per sample" : "next-token targets");
  if (task == ObjectiveTask::classify) return std::make_unique<ClassificationObjective>(options);
  return std::make_unique<NextTokenObjective>(options);
}

LossOptions loss_options(const TrainConfig& t) {
  LossOptions o;
  o.huber_delta = static_cast<float>(t.huber_delta);
  if (t.loss == "quantile") o.quantiles.assign(t.quantiles.begin(), t.quantiles.end());
  return o;
}

std::unique_ptr<Objective> make_objective(const TrainConfig& train, int64_t classes, int64_t y_size) {
  const ObjectiveTask task = classes == 0 ? ObjectiveTask::forecast
                             : y_size > 1 ? ObjectiveTask::next_token
                                          : ObjectiveTask::classify;
  return make_objective(parse_loss(train.loss), loss_options(train), task);
}

std::unique_ptr<Objective> make_objective(const Config& config, const DataPlan& plan) {
  LossOptions o = loss_options(config.train);
  o.backend = &backend_named(backend_for(config.runtime.backend, config.runtime.device));  // the model's (config/model_config.cpp gives it the same)
  const ObjectiveTask task = plan.vocab > 0      ? ObjectiveTask::next_token
                             : plan.classes > 0 ? ObjectiveTask::classify
                                                : ObjectiveTask::forecast;
  return make_objective(parse_loss(config.train.loss), o, task);
}

}  // namespace seqtrain
