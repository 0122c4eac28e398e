// GradReady: how a model's backward tells the training step which part of the flat gradient
// buffer is final, so a data-parallel step can start summing that part over the ranks while
// the backward goes on (docs/DISTRIBUTED.md, "Overlap"). Layers register their parameters in
// forward order and the backward runs them last to first, so what is final is a tail of the
// buffer: grads_final_from(offset) says every gradient at [offset, size()) is written for this
// pass and nothing later in it adds to them. The step opens a GradReadyScope around the
// backward of an accumulation's last micro-batch; without one (a single process, evaluation,
// the other micro-batches) a report costs one thread-local load.
#pragma once
#include <cstddef>
#include <string_view>

namespace seqtrain {

class ParamStore;

class GradReadyHook {
 public:
  virtual ~GradReadyHook() = default;
  virtual void ready_from(size_t offset) = 0;
};

// The hook of this thread's backward for the scope's life (scopes nest: the inner one wins).
class GradReadyScope {
 public:
  explicit GradReadyScope(GradReadyHook* hook);
  ~GradReadyScope();
  GradReadyScope(const GradReadyScope&) = delete;
  GradReadyScope& operator=(const GradReadyScope&) = delete;

 private:
  GradReadyHook* saved_;
};

// Reports [offset, end) final to the open scope's hook, if any.
void grads_final_from(size_t offset);
// The same, at the lowest offset of the entries whose names start with `prefix` (a layer's or a
// block's parameters); nothing when none does. The lookup runs only under an open scope.
void grads_final_from(const ParamStore& params, std::string_view prefix);

}  // namespace seqtrain
