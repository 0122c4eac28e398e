// Conv1d: torch.nn.Conv1d(in, out, kernel, stride=1, padding="same", bias=True) over batch-first,
// channels-last sequences (as every other layer here reads them): x [B, T, in] -> y [B, T, out],
//   y[b, t, o] = bias[o] + sum over c, j of weight[o, c, j] * x[b, t + j - left, c]
// with left = (k-1)/2 zeros before step 0 and k-1-left after step T-1 (torch's 'same' padding,
// which puts the odd extra zero of an even kernel on the right).
// Parameters: "<prefix>.weight" [out, in, k] (torch's layout) and "<prefix>.bias" [out].
// The products are GEMMs over the im2col columns (Backend::im2col_1d): cols [B*T, in*k] holds
// each output step's receptive field in the weight's own (c, j) order, so
//   forward   y = cols W^T + b                     W read as [out, in*k], no reordering
//   backward  dW += dy^T cols, db += column sums of dy, dx = col2im(dy W)
// col2im_1d is a gather (no atomics), so dx's sums run in one fixed order on every backend.
// A padding mask ([B, T] u8, nonzero = padding, nn/sequence_pool.h's padding_mask) makes padded
// steps read as zeros: their values reach no output, and dx there is 0.
// The columns stay in the forward's arena for backward (B*T*in*k floats: im2col trades that memory
// for one large GEMM instead of k small ones per step).
// Frozen parameters (ParamStore flags: a frozen encoder in fine-tuning) get no gradient work: the
// weight GEMM and the bias sums are skipped; backward computes dx only when asked.
#pragma once
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/params.h"

namespace seqtrain {

struct Conv1d {
  Conv1d(ParamStore& params, const std::string& prefix, int64_t in, int64_t out, int64_t kernel);

  // torch's default: weight and bias ~ U(-1/sqrt(in*k), 1/sqrt(in*k)) (kaiming_uniform_(a=sqrt(5))
  // with fan_in = in*k), the weight drawn first.
  void init(Rng& rng);
  // x [B, T, in] contiguous; mask null or [B, T] in the backend's memory, alive until backward.
  Tensor forward(const Tensor& x, const uint8_t* mask, Arena& arena);
  // dy [B, T, out] of the last forward. Adds dW, db (unless frozen); returns dx [B, T, in] when
  // want_dx, an empty Tensor otherwise.
  Tensor backward(const Tensor& dy, Arena& arena, bool want_dx);

  ParamStore& params;
  int64_t in, out, kernel;
  size_t weight = 0, bias = 0;  // ParamStore entry indices

 private:
  Conv1dArgs args_{};  // the last forward's shape and mask
  Tensor cols_;        // its columns [B*T, in*k] (arena)
};

}  // namespace seqtrain
