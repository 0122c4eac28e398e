// LayerNorm: torch.nn.LayerNorm(C, eps=1e-5) over the last dimension, as nanoGPT's LayerNorm(ndim,
// bias) (its optional bias: GPT-2 has one, nanoGPT's bias=False models do not).
//   y = (x - mean) / sqrt(var + eps) * weight (+ bias), mean and biased var over the last dim.
// x is [..., C], contiguous; y has its shape. Parameters: "<prefix>.weight" [C] (init 1) and,
// with bias, "<prefix>.bias" [C] (init 0), PyTorch state_dict names. Both are 1-D, so the
// `2d` and `matrices` decay policies (models/model.cpp) leave them undecayed, as nanoGPT's optimizer
// groups do.
// It computes on the ParamStore's Backend (its layer_norm op). forward saves a view of x and, in
// the arena, each row's mean and 1/sqrt(var + eps) (float): backward needs nothing else.
#pragma once
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "nn/params.h"

namespace seqtrain {

struct LayerNorm {
  static constexpr float kEps = 1e-5f;

  LayerNorm(ParamStore& params, const std::string& prefix, int64_t channels, bool bias = true);

  // weight = 1, bias = 0 (torch's and nanoGPT's initialisation). Draws nothing.
  void init();
  Tensor forward(const Tensor& x, Arena& arena);
  // The same with y in `out`: f32, or bf16 / f16 rounded as it is written, for a 16-bit Linear
  // that follows (backward reads x, mean and rstd, not y; a backend that supports(half_output)).
  Tensor forward(const Tensor& x, Arena& arena, DType out);
  // Adds dweight (and dbias) into params.grad(); returns dx shaped like x.
  Tensor backward(const Tensor& dy, Arena& arena);

  ParamStore& params;
  int64_t channels;
  bool has_bias;
  size_t weight = 0, bias = 0;  // ParamStore entry indices
  Tensor x_saved;               // view of the last forward's input
  float* mean = nullptr;        // [rows] of the last forward (arena)
  float* rstd = nullptr;        // [rows]

 private:
  LayerNormArgs args(int64_t rows) const;  // the op's arguments over the saved state
};

}  // namespace seqtrain
