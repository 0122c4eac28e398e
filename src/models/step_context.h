// StepContext: what one forward and backward pass of a model needs besides the batch (llm.c
// passes the same things to gpt2_forward/backward as arguments): the Arena the activations live
// in, whether it is training (dropout on), the seed of this pass's dropout masks, and the
// gradient of the loss with respect to what forward returned, which the caller sets (from its
// Objective) before backward. Layers report into it what the caller measures about a pass:
// activation bytes held outside the arena (gradient checkpointing's recompute arena).
// One context serves one forward and its backward; the arena must not be reset between them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/dropout_seed.h"
#include "core/arena.h"
#include "core/batch.h"
#include "core/tensor.h"

namespace seqtrain {

struct StepContext {
  explicit StepContext(Arena& a, bool train = false, DropoutSeed seed = {})
      : arena(a), training(train), dropout_seed(seed) {}

  Arena& arena;
  bool training = false;
  // A value, or the step's seed in the backend's memory (a captured step: backend/dropout_seed.h);
  // layers derive theirs with mix_seed either way.
  DropoutSeed dropout_seed;
  Tensor output_grad;        // d(loss)/d(forward's result), shaped like it; set before backward
  // The batch as the host holds it, before its upload (the training step's): layers check
  // values there (token ids) instead of reading device memory back. Null: check on the device.
  const Batch* host_batch = nullptr;
  size_t scratch_bytes = 0;  // most activation bytes a layer held outside `arena` in this pass
  // A model's own regulariser (the masked pretrainer's collapse penalty, models/reconstruction_head.h):
  // forward sets its value per counted target, which the caller adds to the objective's mean (as
  // aux_loss * count into the loss sum); the caller sets aux_weight, the factor its output_grad
  // carries per unit of that sum times the count, before backward. 0 when a model has none.
  double aux_loss = 0;
  double aux_weight = 0;

  void note_scratch(size_t bytes) { scratch_bytes = std::max(scratch_bytes, bytes); }
};

// Each sample's valid steps ([B], 1..T) as the host holds them, for layers that plan their work
// by length (the RNN kernels stop each sample there, attention builds its token mask): the host
// batch's when the context has it, else the batch's own (a host-accessible backend's). Empty when
// every sample runs the whole T.
inline std::span<const int64_t> host_lengths(const Batch& batch, const StepContext& ctx) {
  const Tensor& l = ctx.host_batch ? ctx.host_batch->lengths : batch.lengths;
  if (l.ptr == nullptr || l.numel() == 0) return {};  // a default Tensor has shape {} (numel 1) and no data
  return {static_cast<const int64_t*>(l.ptr), static_cast<size_t>(l.numel())};
}

}  // namespace seqtrain
