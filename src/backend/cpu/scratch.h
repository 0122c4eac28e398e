// The CPU backend's per-call workspace: what an op needs only while it runs (the attention
// kernels' per-thread tiles, the row-wise ops' per-block partial sums), from one Arena per calling
// thread that is reset and carved again at every call. After the first calls of the largest
// shape (its chunks merged into one) the steady-state step allocates nothing, and
// Arena::os_allocations(), which the no-allocation tests count, sees it if it ever does (a
// std::vector here would be invisible to them).
#pragma once
#include <cstddef>

namespace seqtrain {

// `bytes` of uninitialised memory, valid until the calling thread's next call.
void* cpu_scratch(size_t bytes);

}  // namespace seqtrain
