// whole_optimizer_state: see zero_state.h.
#include "train/zero_state.h"

namespace seqtrain {

OptimizerState whole_optimizer_state(const Optimizer& optimizer, Communicator& comm, size_t n) {
  if (!optimizer.sharded()) return optimizer.state();
  OptimizerState mine = optimizer.shard_state();
  const Slice s = slice_of(n, comm.rank(), comm.world());
  ST_CHECK(s.begin == optimizer.shard_begin() && s.end == optimizer.shard_end(),
           "internal error: rank {}'s optimizer shard [{}, {}) is not its slice [{}, {}) of {} parameters", comm.rank(),
           optimizer.shard_begin(), optimizer.shard_end(), s.begin, s.end, n);
  OptimizerState whole;
  whole.step = mine.step;
  whole.param_steps = mine.param_steps;
  // Before the first step no rank has buffers (the same on every rank: the step count is shared).
  for (const std::string& name : optimizer.buffer_names()) {
    auto it = mine.buffers.find(name);
    if (it == mine.buffers.end()) continue;
    ST_CHECK(it->second.size() == s.size(), "internal error: rank {}'s '{}' holds {} values, its slice {}",
             comm.rank(), name, it->second.size(), s.size());
    std::vector<float> all(comm.primary() ? n : 0);
    comm.gather_to_primary(it->second.data(), all.data(), n);
    if (comm.primary()) whole.buffers[name] = std::move(all);
  }
  return whole;
}

}  // namespace seqtrain
