// Dropout: inverted dropout, as torch.nn.Dropout. In training each element is kept with
// probability 1-p and scaled by 1/(1-p), so evaluation needs no rescaling; p=0 or eval mode is
// the identity (the input view is returned as is, no copy and no mask).
// The mask is a pure function of (seed, element index) (backend/dropout_mask.h): the caller
// passes a fresh seed per call (e.g. mix_seed(run_seed, step)), so a run replays bit for bit and
// resumes exactly, and backward regenerates the mask from the seed instead of storing it. It
// runs on a Backend (its dropout op); no result depends on the thread count.
// The random stream is seqtrain's own, so masks do not match torch's for the same seed.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/dropout_mask.h"
#include "core/arena.h"

namespace seqtrain {

// The mask of a forward, read element by element (tests, and PyTorch parity scripts that apply
// seqtrain's factors): true = kept.
struct DropoutMask {
  uint64_t seed = 0;
  float p = 0.f;
  bool operator[](int64_t i) const { return dropout_keep(seed, i, p); }
};

struct Dropout {
  static constexpr int64_t kBlock = kDropoutBlock;  // elements per key of the mask's hash

  // backend: where it computes (a model passes its ParamStore's); null = default_backend().
  explicit Dropout(float p = 0.f, Backend* backend = nullptr);

  Tensor forward(const Tensor& x, Arena& arena, bool training, uint64_t seed);
  // dx = dy * mask * 1/(1-p) with the mask of the last forward (dy itself when it was identity).
  Tensor backward(const Tensor& dy, Arena& arena);

  float p;
  bool active = false;  // whether the last forward applied a mask
  Shape shape;          // shape of the last forward's input
  DropoutMask mask;     // the last forward's; meaningful only when active

 private:
  Backend& backend() const { return backend_ ? *backend_ : default_backend(); }
  Backend* backend_ = nullptr;
};

}  // namespace seqtrain
