// Embedding: a lookup table, as torch.nn.Embedding. ids (int64, any shape, e.g. [N] or [B, T])
// map to rows of "<prefix>.weight" [num, dim]; the output is ids.shape + [dim].
// Backward scatter-adds dy rows into the weight gradient (deterministic: repeated ids add in
// order whatever the thread count); ids are integers, so there is no input gradient and
// backward returns nothing. Both run on the ParamStore's Backend (its embedding op).
#pragma once
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/params.h"

namespace seqtrain {

struct Embedding {
  Embedding(ParamStore& params, const std::string& prefix, int64_t num, int64_t dim);

  // PyTorch default: weight ~ N(0, 1).
  void init(Rng& rng);
  // Throws seqtrain::Error naming the offending id and the vocabulary size if any id is outside
  // [0, num), before anything is written.
  // ids_checked: the caller knows every id is in range (EmbeddingArgs::ids_checked), kept for
  // backward too.
  Tensor forward(const Tensor& ids, Arena& arena, bool ids_checked = false);
  // y += the rows of ids (y shaped ids.shape + [dim]): GPT's position rows added onto its token
  // rows with no second buffer; backward then adds dy's rows into the rows of these ids.
  void forward_add(const Tensor& ids, const Tensor& y, Arena& arena, bool ids_checked = false);
  // Adds into params.grad(weight); dy must be shaped like the last forward's output.
  void backward(const Tensor& dy, Arena& arena);

  ParamStore& params;
  int64_t num, dim;
  size_t weight = 0;
  Tensor ids_saved;  // i64 copy of the last forward's ids, in the arena
  bool ids_checked = false;  // the last forward's

 private:
  EmbeddingArgs lookup(const Tensor& ids) const;  // checks ids' dtype; the op checks their range
  void gather(const Tensor& ids, const Tensor& y, Arena& arena, bool accumulate, bool checked);
};

}  // namespace seqtrain
