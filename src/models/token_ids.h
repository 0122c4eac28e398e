// token_ids: a language model's input as int64 token ids, checked. The loader hands text
// batches over as int64 already; evaluation and older callers pass f32 holding whole numbers.
// Every id is checked (as a double, before any cast) so a bad batch fails before any work, with
// the model type, the position and the vocabulary in the message.
#pragma once
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/tensor.h"

namespace seqtrain {

// x: contiguous [B, T] (or [B, T, 1]) f32 or i64 -> [B, T] i64 in the arena, every id in [0, vocab).
// x and the ids are the backend's memory: its token_ids op checks them, and only a bad value is
// read back (to name it).
// host_x: the same values where the host can read them (StepContext::host_batch's inputs):
// then they are checked there and the backend only converts (no read-back, no synchronization).
Tensor token_ids(Backend& backend, const Tensor& x, Arena& arena, const std::string& model_type, int64_t vocab,
                 const Tensor* host_x = nullptr);
// The check token_ids makes of host_x on the host alone (an Error naming a bad id and its place).
void check_token_ids(const Tensor& host_x, const std::string& model_type, int64_t vocab);

}  // namespace seqtrain
