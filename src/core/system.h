// What this machine has: its hardware threads and the memory it can still give (MemAvailable).
// Read where a decision depends on them (loader workers, the batch-size search, whether a
// model's buffers fit) rather than assumed.
#pragma once

#include <cstdint>

namespace seqtrain {

// Hardware threads, at least 1.
int64_t system_cores();
// MemAvailable from /proc/meminfo in bytes; 0 when unreadable.
int64_t system_available_ram();

}  // namespace seqtrain
