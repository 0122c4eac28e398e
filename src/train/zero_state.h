// The whole optimizer state of a run whose AdamW moments are sharded over the ranks (train.zero,
// ZeRO stage 1): each rank's slice of every moment buffer is gathered to the primary, which
// writes the checkpoint. Checkpoints stay unsharded, so a run resumes on any rank count with
// train.zero on or off (each rank keeps its slice of what it loads: Optimizer::load_state).
#pragma once
#include "optim/optimizer.h"
#include "train/communicator.h"

namespace seqtrain {

// Collective: every rank calls it. Without a shard, the optimizer's own state(); with one, the
// primary's result holds every element (the other ranks' holds the counts and no buffers).
// n: the parameter count (the whole buffer the shards cut).
OptimizerState whole_optimizer_state(const Optimizer& optimizer, Communicator& comm, size_t n);

}  // namespace seqtrain
