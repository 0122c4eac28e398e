// BatchNorm: torch.nn.BatchNorm1d(C, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)
// over channels-last activations x [..., C] (the cnn's [B, T, C]: torch's BatchNorm1d on the
// transposed [B, C, T]), with padding left out:
//   training  each channel's mean and biased variance over the valid rows only (a [rows] mask,
//             nn/sequence_pool.h's [B, T] padding mask read row by row), y = (x - mean) / sqrt(var
//             + eps) * weight + bias; running_mean / running_var move a momentum share toward the
//             batch's mean and UNBIASED variance (n/(n-1)), num_batches_tracked += 1, as torch's.
//   eval      the running statistics instead (ctx.training false: validation, test, predict, embed).
// Padded rows are left out of every sum and get y = 0, dx = 0: nothing of theirs reaches a valid
// row, and a batch's statistics are those of its valid steps alone (the python mirror gathers the
// valid steps, runs torch's BatchNorm1d on them, and scatters them back).
// Tensors, named as torch's state_dict: "<prefix>.weight" [C] (init 1), "<prefix>.bias" [C] (0),
// and three buffers (ParamStore::add_buffer: never trained, decayed or unfrozen)
// "<prefix>.running_mean" [C] (0), "<prefix>.running_var" [C] (1) and
// "<prefix>.num_batches_tracked" [] (0; a float here, torch's int64: load_state_dict's copy_
// converts it, and a float counts exactly up to 2^24 steps). Living in the flat buffer, they are
// checkpointed, resumed, exported and broadcast with the parameters. The update runs on the device
// inside the backend's batch_norm_forward: the step reads nothing back.
// Frozen BatchNorm: while the weight is frozen (fine-tuning's first epochs,
// train.freeze_encoder_epochs, or a frozen parameter group) forward runs as in eval mode — the
// running statistics, no update — so a frozen encoder keeps every byte, its statistics included,
// as is common practice when fine-tuning with BatchNorm.
// Batch statistics make a sample's output depend on its batch: per micro-batch under
// train.grad_accum (as torch's), per rank under data parallelism (so the cnn refuses model.norm
// batch with more than one rank: train/train_loop.cpp).
#pragma once
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "nn/params.h"

namespace seqtrain {

struct BatchNorm {
  static constexpr float kEps = 1e-5f, kMomentum = 0.1f;

  BatchNorm(ParamStore& params, const std::string& prefix, int64_t channels);

  // weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0 (torch's). Draws nothing.
  void init();
  // x [..., C] contiguous; mask null (every row valid) or [rows] u8 in the backend's memory, alive
  // until backward; count: the valid rows (the caller knows them from the batch's lengths).
  // training: the batch's statistics (unless the weight is frozen, above).
  Tensor forward(const Tensor& x, const uint8_t* mask, int64_t count, bool training, Arena& arena);
  // Adds dweight and dbias into params.grad() (unless frozen); returns dx shaped like x.
  Tensor backward(const Tensor& dy, Arena& arena);

  ParamStore& params;
  std::string prefix;
  int64_t channels;
  size_t weight = 0, bias = 0, running_mean = 0, running_var = 0, num_batches_tracked = 0;  // entry indices

 private:
  BatchNormArgs args_{};  // the last forward's (x, mask, count, mode, saved mean and rstd)
  Shape shape_;
};

}  // namespace seqtrain
