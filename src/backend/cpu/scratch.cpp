// The CPU backend's per-call workspace. See scratch.h.
#include "backend/cpu/scratch.h"

#include "core/arena.h"

namespace seqtrain {

void* cpu_scratch(size_t bytes) {
  thread_local Arena work;
  work.reset();
  return work.alloc(bytes);
}

}  // namespace seqtrain
