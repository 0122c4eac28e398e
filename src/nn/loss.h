// Losses with mean reduction, as torch.nn's: MSE, MAE (L1), Huber, and cross-entropy fused with
// log-softmax. loss_forward returns the scalar; loss_backward writes d(loss)/d(pred) (it
// overwrites dpred, it does not accumulate), times `scale`.
// loss_sum/loss_sum_backward are the same losses with sum reduction plus the count the mean
// divides by (train/objective.h builds on them, so micro-batches of different sizes add up).
// Sums run in double so the mean of a large batch does not lose the small terms.
//
// Quantile (pinball) loss: pred holds Q forecasts per target (the levels in LossOptions::
// quantiles, innermost: pred [..., m * Q] for target [..., m]); per element
// max(tau (y - p), (tau - 1) (y - p)), torch's formula, counted per forecast (m * Q).
//
// Shapes: regression losses take pred and target of the same shape (f32). Cross-entropy takes
// logits [..., C] (f32) and int64 class targets with logits.numel()/C elements (e.g. [N] for
// [N, C], [B, T] for [B, T, C]); targets equal to ignore_index contribute nothing and are left
// out of the mean, like torch. If every target is ignored the loss and gradient are 0, where
// torch returns NaN: a masked-pretraining batch with no masked token must not poison the weights.
// Cross-entropy runs on a Backend (its cross_entropy op: the CPU's is a per-ISA vector kernel);
// the regression losses are plain loops here.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace seqtrain {

class Backend;

enum class LossKind : uint8_t { mse, mae, huber, cross_entropy, quantile };

struct LossOptions {
  float huber_delta = 1.0f;      // torch.nn.HuberLoss(delta=1.0); must be > 0
  int64_t ignore_index = -100;   // torch.nn.CrossEntropyLoss(ignore_index=-100)
  Backend* backend = nullptr;    // where cross-entropy computes: the model's; null = default_backend()
  // The caller checked every target on the host (count_targets): a device skips reading its own
  // check back, a synchronization (CrossEntropyArgs::targets_checked).
  bool targets_checked = false;
  std::vector<float> quantiles;  // quantile: the levels (each in (0, 1), increasing)
};

// Names: "mse", "mae" (alias "l1"), "huber", "cross_entropy" (alias "ce"), "quantile"; anything else
// throws an Error listing them.
LossKind parse_loss(const std::string& name);
std::string_view loss_name(LossKind k);

// The sum over counted targets and their count: regression counts every element, cross-entropy
// every row whose target is not ignore_index. loss_forward == sum / count (0 when count is 0).
// correct (cross-entropy only): counted rows whose largest logit is the target (the first
// largest on ties), for accuracy.
struct LossSum {
  double sum = 0;
  int64_t count = 0;
  int64_t correct = 0;
};
LossSum loss_sum(LossKind kind, const Tensor& pred, const Tensor& target, const LossOptions& opt = {});
// Writes scale * d(sum)/d(pred) into dpred (overwrites; ignored rows get 0).
void loss_sum_backward(LossKind kind, const Tensor& pred, const Tensor& target, Tensor dpred, double scale,
                       const LossOptions& opt = {});

// The training step's loss without a host read: adds the sum into acc[0] and, cross-entropy,
// the correct rows into acc[1] (doubles in the backend's memory); checks shapes as loss_sum.
void loss_sum_accumulate(LossKind kind, const Tensor& pred, const Tensor& target, double* acc,
                         const LossOptions& opt = {});
// The count loss_sum would return, from targets the host can read (a batch before its upload):
// every element (regression), the rows whose target is not ignore_index (cross-entropy, whose
// targets are checked here: each in [0, classes) or ignore_index, the backends' error text).
// pred only gives the shape (it may be device memory).
int64_t count_targets(LossKind kind, const Tensor& pred, const Tensor& host_target, const LossOptions& opt = {});

float loss_forward(LossKind kind, const Tensor& pred, const Tensor& target, const LossOptions& opt = {});
// dpred must have pred's shape. MAE's gradient at an exact tie (pred == target) is 0, torch's sign().
void loss_backward(LossKind kind, const Tensor& pred, const Tensor& target, Tensor dpred, float scale = 1.f,
                   const LossOptions& opt = {});

}  // namespace seqtrain
