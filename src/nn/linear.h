// Linear: y = x W^T + b, as torch.nn.Linear.
// x is [..., in] (any leading dims, contiguous; they are flattened to N rows), y is [..., out].
// Parameters: "<prefix>.weight" [out, in] and "<prefix>.bias" [out], PyTorch state_dict names.
// forward saves a view of x (not a copy): x must stay alive and unchanged until backward, which
// holds when it lives in the same Arena cycle, as every activation does.
//
// `compute` is the operand type of its products, the run's precision policy for the layers that
// follow it (backend/precision.h; the model decides which do): f32, or bf16 / f16 with fp32
// accumulation, fp32 master weights, fp32 bias and fp32 output, as torch.autocast runs a Linear.
// The products themselves are a WeightProduct, which the GPT's tied head shares.
#pragma once
#include <string>

#include "core/arena.h"
#include "core/rng.h"
#include "nn/params.h"

namespace seqtrain {

class Backend;

// The matrix products of a layer with a weight W [out, in] applied to rows x [N, in] — a Linear
// without its bias, or the GPT's tied head (logits = x wte^T) — in one compute precision, so the
// policy is applied in one place:
//   forward   y[N, out]  = x W^T (+ b on every row, when given a bias)
//   backward  dW[out, in] += dy^T x;  dx[N, in] = dy W  (and db += the column sums of dy, when given)
// f32: fp32 GEMMs on x and W as stored. bf16 / f16 (torch.autocast's semantics): forward rounds
// x and W to 16 bits into the arena (the fp32 master W is untouched) and keeps both copies for
// backward, which rounds dy once and runs both of its products on the 16-bit operands; every
// product accumulates in fp32 and writes fp32, and dW is added to the fp32 gradient; the bias
// and its gradient stay fp32. The conversions are the Backend's (convert), the GEMMs its 16-bit
// ones (gemm_bias with a bias).
class WeightProduct {
 public:
  // Throws Error naming `what` when compute is not f32 / bf16 / f16 or `backend` lacks its GEMM.
  WeightProduct(Backend& backend, DType compute, const std::string& what);

  // x: contiguous [..., in], f32 — or already in the compute type (bf16 / f16: a layer that wrote
  // its output rounded, Activation::forward with `out`), which is then the rounded copy itself;
  // y: N x out floats (N = rows of x), row stride out, overwritten; bias: null or out floats.
  void forward(const Tensor& x, const float* w, const float* bias, int64_t out, float* y, Arena& arena);
  // dy: N x out floats of the last forward; dw: the gradient of W (added to); db: null or the
  // bias gradient (added to); dx: N x in floats, overwritten. dy, w and the forward's input must
  // be unchanged since forward.
  void backward(const float* dy, const float* w, float* dw, float* db, float* dx, Arena& arena);

  DType compute() const { return compute_; }
  const Tensor& input() const { return x_; }  // the last forward's x (an arena view)

 private:
  Backend* be_;
  DType compute_;
  int64_t out_ = 0;
  Tensor x_;              // the last forward's input (a view)
  Tensor x16_, w16_;      // its and W's 16-bit copies (compute != f32), in the forward's arena
};

// What a layer feeding a Linear of `compute` writes: compute itself when it is 16-bit and the
// backend rounds as it writes (supports(half_output)), f32 otherwise.
DType half_output_type(const Backend& backend, DType compute);

struct Linear {
  // "<prefix>.weight" and "<prefix>.bias".
  Linear(ParamStore& params, const std::string& prefix, int64_t in, int64_t out, bool bias = true,
         DType compute = DType::f32);
  // Names of the caller's (torch's nn.MultiheadAttention packs its q/k/v projection as
  // "in_proj_weight" and "in_proj_bias"); bias_name unused without a bias.
  Linear(ParamStore& params, const std::string& weight_name, const std::string& bias_name, int64_t in, int64_t out,
         bool bias, DType compute);

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
  WeightProduct product;        // x W^T and its gradients in the compute precision
};

}  // namespace seqtrain
