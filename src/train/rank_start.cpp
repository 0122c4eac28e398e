// The agreed start of a data-parallel run: see rank_start.h.
#include "train/rank_start.h"

#include "core/error.h"
#include "io/atomic_dir.h"

#include <vector>

namespace seqtrain {
namespace {
// The running binary's hash; 0 when it cannot be read (then only the configs are compared).
uint64_t binary_hash() {
  try {
    return file_fnv1a("/proc/self/exe", "to compare the binary across ranks");
  } catch (const Error&) {
    return 0;
  }
}
}  // namespace

RankIdentity rank_identity(const std::string& config_hash) { return RankIdentity{config_hash, binary_hash()}; }

void agree_to_start(Communicator& comm, const std::string& local_error, const RankIdentity& me) {
  if (comm.world() == 1) {
    if (!local_error.empty()) throw Error(local_error);
    return;
  }
  // Rank 0's identity, compared on every rank.
  const std::string config0 = broadcast_string(comm, me.config_hash);
  uint64_t binary0 = me.binary_hash;
  comm.broadcast_bytes(&binary0, sizeof binary0);
  std::string problem = local_error;
  if (problem.empty() && me.binary_hash != binary0)
    problem = "its seqtrain binary differs from rank 0's; install the same build on every machine (the path "
              "mpirun runs must hold one binary everywhere)";
  if (problem.empty() && me.config_hash != config0)
    problem = "its resolved config differs from rank 0's (config hash " + me.config_hash + " against " + config0 +
              "); give every rank the same config file and --set overrides";
  // Which ranks failed, then the first one's message from that rank.
  std::vector<double> failed(static_cast<size_t>(comm.world()), 0.0);
  failed[static_cast<size_t>(comm.rank())] = problem.empty() ? 0.0 : 1.0;
  comm.all_reduce_sum(failed.data(), failed.size());
  int first = -1, count = 0;
  for (int r = 0; r < comm.world(); ++r)
    if (failed[static_cast<size_t>(r)] > 0) {
      if (first < 0) first = r;
      ++count;
    }
  if (first < 0) return;
  const std::string message = broadcast_string(comm, problem, first);
  if (first == 0) throw RankAgreedError(message);
  throw RankAgreedError(fmt::format("rank {} of {}{} could not start: {}", first, comm.world(),
                                    count > 1 ? fmt::format(" (and {} more)", count - 1) : std::string(), message));
}

}  // namespace seqtrain
