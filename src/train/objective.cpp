// Objectives over nn/loss's sum-reduced losses. See objective.h.
#include "train/objective.h"

#include <algorithm>

#include "backend/backend.h"
#include "backend/cuda_plugin.h"
#include "core/error.h"
#include "train/data_plan.h"

namespace seqtrain {
namespace {

// The batch's targets, checked present. No objective of these tasks has padded targets (each
// predicts per sample, or per position of unpadded text), so a loss mask is refused, not ignored.
const Tensor& targets_of(const Batch& b, std::string_view objective) {
  ST_CHECK(b.targets.ptr != nullptr, "{}: the batch holds no targets (a source without y cannot be trained or scored "
           "on this objective)", objective);
  ST_CHECK(b.loss_mask.ptr == nullptr, "{}: the batch carries a loss mask, which this objective does not read; a loss "
           "mask belongs to masked pretraining", objective);
  return b.targets;
}

// Forecasting and regression: mse / mae / huber / quantile over every element of [B, outputs].
class RegressionObjective final : public Objective {
 public:
  RegressionObjective(LossKind kind, const LossOptions& opt, ObjectiveTask task)
      : kind_(kind), opt_(opt), task_(task), name_(task_name(task)) {
    name_ += "/";
    name_ += loss_name(kind);
  }
  std::string_view name() const override { return name_; }
  ObjectiveTask task() const override { return task_; }
  ObjectiveSum forward(const Tensor& pred, const Batch& b) const override {
    const LossSum s = loss_sum(kind_, pred, targets_of(b, name_), opt_);
    return {s.sum, s.count, 0};
  }
  void backward(const Tensor& pred, const Batch& b, Tensor dpred, double scale, bool) const override {
    loss_sum_backward(kind_, pred, targets_of(b, name_), dpred, scale, opt_);
  }
  int64_t count(const Tensor& pred, const Batch& host) const override {
    return count_targets(kind_, pred, targets_of(host, name_), opt_);
  }
  void accumulate(const Tensor& pred, const Batch& b, double* acc) const override {
    loss_sum_accumulate(kind_, pred, targets_of(b, name_), acc, opt_);
  }

 private:
  LossKind kind_;
  LossOptions opt_;
  ObjectiveTask task_;
  std::string name_;
};

// Classification: cross-entropy over one label per sample (logits [B, C], labels [B]), with
// the count of labels whose largest logit is the label (the first largest on ties). Next-token
// prediction is the same at every position (logits [B, T, V], labels [B, T]), each position one
// counted target, as F.cross_entropy(logits.view(-1, V), y.view(-1)).
class ClassificationObjective final : public Objective {
 public:
  ClassificationObjective(const LossOptions& opt, ObjectiveTask task) : opt_(opt), task_(task) {}
  std::string_view name() const override {
    return task_ == ObjectiveTask::classify ? "classify/cross_entropy" : "next_token/cross_entropy";
  }
  ObjectiveTask task() const override { return task_; }
  bool has_accuracy() const override { return true; }
  ObjectiveSum forward(const Tensor& pred, const Batch& b) const override {
    // The op counts the correct rows in its pass over the logits (checks shapes and labels too).
    const LossSum s = loss_sum(LossKind::cross_entropy, pred, labels(b), opt_);
    return {s.sum, s.count, s.correct};
  }
  void backward(const Tensor& pred, const Batch& b, Tensor dpred, double scale, bool targets_checked) const override {
    LossOptions o = opt_;
    o.targets_checked = targets_checked;
    loss_sum_backward(LossKind::cross_entropy, pred, labels(b), dpred, scale, o);
  }
  int64_t count(const Tensor& pred, const Batch& host) const override {
    return count_targets(LossKind::cross_entropy, pred, labels(host), opt_);
  }
  void accumulate(const Tensor& pred, const Batch& b, double* acc) const override {
    LossOptions o = opt_;
    o.targets_checked = true;  // the step called count() on the host batch first
    loss_sum_accumulate(LossKind::cross_entropy, pred, labels(b), acc, o);
  }

 private:
  // int64 labels, one per sample ([B]) or per position ([B, T]); the loss op checks them against
  // the logits' shape.
  const Tensor& labels(const Batch& b) const {
    const Tensor& t = targets_of(b, name());
    ST_CHECK(t.dtype == DType::i64, "{}: the targets are {} values, not int64 class labels", name(), dtype_name(t.dtype));
    return t;
  }

  LossOptions opt_;
  ObjectiveTask task_;
};

// Masked pretraining: the MSE over the positions the loss mask marks (masked and valid), counted
// one per such element, as sum(m * (p - x)^2) / sum(m) in PyTorch; a batch with nothing masked
// counts nothing. Host loops: masked pretraining runs on the CPU for now.
class MaskedReconstructionObjective final : public Objective {
 public:
  std::string_view name() const override { return "masked_pretrain/mse"; }
  ObjectiveTask task() const override { return ObjectiveTask::masked_pretrain; }
  bool host_loops() const override { return true; }
  ObjectiveSum forward(const Tensor& pred, const Batch& b) const override {
    const Operands o = operands(pred, b);
    double sum = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < o.n; ++i)
      if (o.m[i] != 0.f) {
        const double d = static_cast<double>(o.p[i]) - o.t[i];
        sum += d * d;
        ++count;
      }
    return {sum, count, 0};
  }
  void backward(const Tensor& pred, const Batch& b, Tensor dpred, double scale, bool) const override {
    const Operands o = operands(pred, b);
    const float k = static_cast<float>(2 * scale);
    float* g = dpred.f32();
    for (int64_t i = 0; i < o.n; ++i) g[i] = o.m[i] != 0.f ? k * (o.p[i] - o.t[i]) : 0.f;
  }
  int64_t count(const Tensor& pred, const Batch& host) const override {
    const Operands o = operands(pred, host);
    return std::count_if(o.m, o.m + o.n, [](float m) { return m != 0.f; });
  }
  void accumulate(const Tensor& pred, const Batch& b, double* acc) const override { acc[0] += forward(pred, b).loss; }

 private:
  struct Operands {
    const float* p;
    const float* t;
    const float* m;
    int64_t n;
  };
  Operands operands(const Tensor& pred, const Batch& b) const {
    ST_CHECK(b.targets.ptr != nullptr && b.loss_mask.ptr != nullptr, "{}: the batch needs its inputs as targets and a "
             "loss mask (data/masking.h fills both for train.task masked_pretrain)", name());
    ST_CHECK(pred.numel() == b.targets.numel() && b.loss_mask.numel() == pred.numel() && pred.dtype == DType::f32 &&
                 b.targets.dtype == DType::f32,
             "{}: prediction {}, targets {} and loss mask {} must have one shape", name(), shape_str(pred.shape),
             shape_str(b.targets.shape), shape_str(b.loss_mask.shape));
    return {pred.f32(), b.targets.f32(), b.loss_mask.f32(), pred.numel()};
  }
};

}  // namespace

const char* task_name(ObjectiveTask task) {
  switch (task) {
    case ObjectiveTask::forecast: return "forecast";
    case ObjectiveTask::classify: return "classify";
    case ObjectiveTask::regress: return "regress";
    case ObjectiveTask::next_token: return "next_token";
    case ObjectiveTask::masked_pretrain: return "masked_pretrain";
  }
  return "?";
}

std::unique_ptr<Objective> make_objective(LossKind loss, const LossOptions& options, ObjectiveTask task) {
  if (task == ObjectiveTask::masked_pretrain) {
    ST_CHECK(loss == LossKind::mse, "train.loss is {} but masked pretraining reconstructs its inputs with the masked "
             "mse: set train.loss: mse (the default)", loss_name(loss));
    return std::make_unique<MaskedReconstructionObjective>();
  }
  if (task == ObjectiveTask::forecast || task == ObjectiveTask::regress) {
    ST_CHECK(loss != LossKind::cross_entropy,
             "train.loss is cross_entropy, which needs class labels, but this data has regression targets; use "
             "mse, mae, huber or quantile");
    return std::make_unique<RegressionObjective>(loss, options, task);
  }
  ST_CHECK(loss == LossKind::cross_entropy, "train.loss is {} but this data holds class labels ({}); set "
           "train.loss: cross_entropy", loss_name(loss),
           task == ObjectiveTask::classify ? "one per sample" : "next-token targets");
  return std::make_unique<ClassificationObjective>(options, task);
}

LossOptions loss_options(const TrainConfig& t) {
  LossOptions o;
  o.huber_delta = static_cast<float>(t.huber_delta);
  if (t.loss == "quantile") o.quantiles.assign(t.quantiles.begin(), t.quantiles.end());
  return o;
}

std::unique_ptr<Objective> make_objective(const TrainConfig& train, int64_t classes, int64_t y_size) {
  if (train.task == "masked_pretrain") return make_objective(parse_loss(train.loss), loss_options(train), ObjectiveTask::masked_pretrain);
  const ObjectiveTask task = classes == 0 ? (train.task == "regress" ? ObjectiveTask::regress : ObjectiveTask::forecast)
                             : y_size > 1 ? ObjectiveTask::next_token
                                          : ObjectiveTask::classify;
  return make_objective(parse_loss(train.loss), loss_options(train), task);
}

ObjectiveTask resolve_task(const Config& config, const DataPlan& plan) {
  const ObjectiveTask data = plan.vocab > 0      ? ObjectiveTask::next_token
                             : plan.classes > 0 ? ObjectiveTask::classify
                                                : ObjectiveTask::forecast;
  const std::string& t = config.train.task;
  if (t == "auto") return data;
  // The source's checks (npy X, no labels needed) are the data plan's (train/data_plan.cpp).
  if (t == "masked_pretrain") return ObjectiveTask::masked_pretrain;
  const char* holds = data == ObjectiveTask::next_token ? "text (next-token targets)"
                      : data == ObjectiveTask::classify  ? "class labels (y of shape [N])"
                      : plan.windows                     ? "windows of a series (a forecast per window)"
                                                         : "float targets";
  const auto refuse = [&](const char* fix) {
    fail("config key 'train.task' is {} but the data holds {}; {}", t, holds, fix);
  };
  if (t == "next_token" && data != ObjectiveTask::next_token)
    refuse("next_token needs data.source text, or set train.task: auto");
  if (t == "classify" && data != ObjectiveTask::classify)
    refuse("classify needs integer class labels: data.source npy with y saved as [N] labels");
  if (t == "forecast" && data != ObjectiveTask::forecast)
    refuse("forecast needs float targets (csv/synthetic windows, or npy y [N, H(, targets)])");
  if (t == "regress") {
    if (data != ObjectiveTask::forecast || plan.windows)
      refuse("regress needs data.source npy with float y of shape [N, targets]");
    if (plan.y_shape.size() != 1)
      fail("config key 'train.task' is regress, one vector per sample, but y has shape [N{}]; save y as [N, "
           "targets] or use train.task: forecast", [&] {
             std::string d;
             for (int64_t v : plan.y_shape) d += ", " + std::to_string(v);
             return d;
           }());
    return ObjectiveTask::regress;
  }
  return data;
}

std::unique_ptr<Objective> make_objective(const Config& config, const DataPlan& plan) {
  LossOptions o = loss_options(config.train);
  o.backend = &backend_named(backend_for(config.runtime.backend, config.runtime.device));  // the model's (config/model_config.cpp gives it the same)
  return make_objective(parse_loss(config.train.loss), o, resolve_task(config, plan));
}

}  // namespace seqtrain
