// parallel_each: independent pieces of host-side work (a fleet's files, a backtest's series)
// spread over the machine's cores. Each index runs exactly once, on whichever thread takes it
// next; the first index that throws (in index order, whatever thread met it) is rethrown after
// every thread is done, so the error a user sees does not depend on timing. The work must
// write only to its own index's slots.
#pragma once
#include <cstddef>
#include <functional>

namespace seqtrain {

void parallel_each(size_t n, const std::function<void(size_t)>& work);

}  // namespace seqtrain
