// ModelPass: one forward or backward of a Model outside a TrainStep, as tests drive them. The
// batch holds only inputs; the context (arena, training, dropout seed) lives as long as the
// pass, so a test that needs what layers reported (scratch_bytes) keeps the pass it ran.
#pragma once
#include "core/batch.h"
#include "models/model.h"

namespace seqtrain::testing {

struct ModelPass {
  ModelPass(Model& m, Arena& arena, bool training, uint64_t seed = 0) : model(m), ctx(arena, training, seed) {}
  Tensor forward(const Tensor& inputs) { return model.forward(batch_of(inputs), ctx); }
  void backward(const Tensor& dy) {
    ctx.output_grad = dy;
    model.backward(ctx);
  }

  Model& model;
  StepContext ctx;
};

}  // namespace seqtrain::testing
