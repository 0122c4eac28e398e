// Dropout: inverted dropout, as torch.nn.Dropout. In training each element is kept with
// probability 1-p and scaled by 1/(1-p), so evaluation needs no rescaling; p=0 or eval mode is
// the identity (the input view is returned as is, no copy and no mask).
// The mask is a pure function of (seed, element index): the caller passes a fresh seed per call
// (e.g. mix_seed(run_seed, step)), so a run replays bit for bit and resumes exactly. Elements
// are drawn in fixed blocks of kBlock, each from Rng(seed, block), which lets blocks be drawn in
// parallel without the mask depending on the thread count.
// The random stream is seqtrain's own, so masks do not match torch's for the same seed.
#pragma once
#include <cstdint>

#include "core/arena.h"

namespace seqtrain {

struct Dropout {
  static constexpr int64_t kBlock = 4096;

  explicit Dropout(float p = 0.f);

  Tensor forward(const Tensor& x, Arena& arena, bool training, uint64_t seed);
  // dx = dy * mask * 1/(1-p) with the mask of the last forward (dy itself when it was identity).
  Tensor backward(const Tensor& dy, Arena& arena);

  float p;
  bool active = false;      // whether the last forward applied a mask
  Shape shape;              // shape of the last forward's input
  uint8_t* mask = nullptr;  // [numel], 1 = kept; arena memory, valid only when active
};

}  // namespace seqtrain
