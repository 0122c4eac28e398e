// GradReady: see grad_ready.h.
#include "nn/grad_ready.h"

#include <algorithm>
#include <limits>

#include "nn/params.h"

namespace seqtrain {
namespace {
thread_local GradReadyHook* current = nullptr;
}  // namespace

GradReadyScope::GradReadyScope(GradReadyHook* hook) : saved_(current) { current = hook; }
GradReadyScope::~GradReadyScope() { current = saved_; }

void grads_final_from(size_t offset) {
  if (current) current->ready_from(offset);
}

void grads_final_from(const ParamStore& params, std::string_view prefix) {
  if (!current) return;
  size_t lowest = std::numeric_limits<size_t>::max();
  for (const ParamEntry& e : params.entries())
    if (std::string_view(e.name).substr(0, prefix.size()) == prefix) lowest = std::min(lowest, e.offset);
  if (lowest != std::numeric_limits<size_t>::max()) current->ready_from(lowest);
}

}  // namespace seqtrain
