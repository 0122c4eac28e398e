// The start of a data-parallel run, agreed by every rank before the first collective of the loop:
// each rank has built its loop (read its data, built the model) or failed, and each runs the
// same config with the same binary. A failure on any rank, or a difference, becomes one error,
// printed by rank 0 and naming the rank and the cause, on which every rank exits non-zero
// before anything of the run is written: nobody is left waiting in a collective for a rank that
// gave up, and no checkpoint is half-written.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"
#include "train/communicator.h"

namespace seqtrain {

// The agreed failure: every rank throws it; the CLI prints it on rank 0 only and every rank
// exits non-zero in order (MPI finalised), since every rank knows.
struct RankAgreedError : Error {
  using Error::Error;
};

// What each rank compares with rank 0's.
struct RankIdentity {
  std::string config_hash;   // the resolved config (config/config.h's config_hash)
  uint64_t binary_hash = 0;  // the running executable's bytes (FNV-1a of /proc/self/exe)
};

// The identity of this process for `config_hash`.
RankIdentity rank_identity(const std::string& config_hash);

// Collective: returns when every rank started well with rank 0's identity; otherwise throws
// RankAgreedError on every rank. `local_error` is this rank's start-up error ("" when none).
void agree_to_start(Communicator& comm, const std::string& local_error, const RankIdentity& me);

}  // namespace seqtrain
