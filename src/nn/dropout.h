// Dropout: inverted dropout, as torch.nn.Dropout. In training each element is kept with
// probability 1-p and scaled by 1/(1-p), so evaluation needs no rescaling; p=0 or eval mode is
// the identity (the input view is returned as is, no copy and no mask).
// The mask is a pure function of (seed, element index) (backend/dropout_mask.h): the caller
// passes a fresh seed per call (e.g. mix_seed(run_seed, step)), so a run replays bit for bit and
// resumes exactly, and backward regenerates the mask from the seed instead of storing it. The
// seed may be the step's in device memory (backend/dropout_seed.h: a captured step), which the
// backend's op mixes as it runs. It
// runs on a Backend (its dropout op); no result depends on the thread count.
// The random stream is seqtrain's own, so masks do not match torch's for the same seed.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/dropout_mask.h"
#include "core/arena.h"
#include "core/batch.h"

namespace seqtrain {

// The rows of the pass this thread runs, within the global batch of a data-parallel step (TrainStep
// opens one around a micro-batch's forward and backward): Dropout keys its mask by the global
// element index and attention by the global row, so a rank's shard draws the one-process run's
// masks for the same samples. Scoped per thread, as the tracer is, so the dozen layers between
// the step and a dropout need not carry it; outside a scope (evaluation, one process) batches
// are whole.
class PassRows {
 public:
  PassRows(BatchRows rows, int64_t local_rows);
  ~PassRows();
  PassRows(const PassRows&) = delete;
  PassRows& operator=(const PassRows&) = delete;
  // The open scope's rows when a tensor's batch dimension has `rows` rows (the shard's count);
  // whole otherwise (a packed or reshaped tensor, or no scope).
  static BatchRows of(int64_t rows);

 private:
  BatchRows saved_;
  int64_t saved_local_;
};

// The mask of a forward, read element by element (tests, and PyTorch parity scripts that apply
// seqtrain's factors): true = kept.
// A seed in device memory (a captured step's) is read where it lies: host memory only.
struct DropoutMask {
  DropoutSeed seed;
  float p = 0.f;
  bool operator[](int64_t i) const { return dropout_keep(resolve_seed(seed), i, p); }
};

struct Dropout {
  static constexpr int64_t kBlock = kDropoutBlock;  // elements per key of the mask's hash

  // backend: where it computes (a model passes its ParamStore's); null = default_backend().
  explicit Dropout(float p = 0.f, Backend* backend = nullptr);

  // batch_dim: x's batch dimension (1 for a time-major [T, B, H]), for the global mask index.
  Tensor forward(const Tensor& x, Arena& arena, bool training, DropoutSeed seed, int batch_dim = 0);
  // dx = dy * mask * 1/(1-p) with the mask of the last forward (dy itself when it was identity).
  Tensor backward(const Tensor& dy, Arena& arena);

  float p;
  bool active = false;  // whether the last forward applied a mask
  Shape shape;          // shape of the last forward's input
  DropoutMask mask;     // the last forward's; meaningful only when active
  BatchRows rows;       // the last forward's rows in the global batch (whole: total 0)
  int batch_dim = 0;    // and x's batch dimension

 private:
  Backend& backend() const { return backend_ ? *backend_ : default_backend(); }
  // y = dropout(x) over the global element indices of a shard (rows, batch_dim).
  void map(const float* x, float* y) const;
  Backend* backend_ = nullptr;
};

}  // namespace seqtrain
