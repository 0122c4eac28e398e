// Linear: y = x W^T + b, as torch.nn.Linear.
// x is [..., in] (any leading dims, contiguous; they are flattened to N rows), y is [..., out].
// Parameters: "<prefix>.weight" [out, in] and "<prefix>.bias" [out], PyTorch state_dict names.
// forward saves a view of x (not a copy): x must stay alive and unchanged until backward, which
// holds when it lives in the same Arena cycle, as every activation does.
#pragma once
#include <string>

#include "core/arena.h"
#include "core/rng.h"
#include "nn/params.h"

namespace seqtrain {

struct Linear {
  Linear(ParamStore& params, const std::string& prefix, int64_t in, int64_t out, bool bias = true);

  // PyTorch default: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_(a=sqrt(5))
  // reduces to exactly this bound for the weight). Draws the weight first, then the bias.
  void init(Rng& rng);
  Tensor forward(const Tensor& x, Arena& arena);
  // Adds dW, db into params.grad(); returns dx shaped like x.
  Tensor backward(const Tensor& dy, Arena& arena);

  ParamStore& params;
  int64_t in, out;
  bool has_bias;
  size_t weight = 0, bias = 0;  // ParamStore entry indices
  Tensor x_saved;               // view of the last forward's input
};

}  // namespace seqtrain
