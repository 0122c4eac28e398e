// Elementwise activations with forward/backward: ReLU, Tanh, Sigmoid and GELU.
// GELU comes in both of torch's forms: ActKind::gelu is the exact 0.5 x (1 + erf(x / sqrt 2))
// (torch.nn.GELU(), approximate='none'); ActKind::gelu_tanh is the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh', GPT-2's).
// They run on a Backend (its activation op: the CPU's GELU is a vector kernel per ISA level); the
// raw-pointer forms are public so code with its own buffers (GPT generation) can call them; the
// Activation struct is the layer form that saves x and y for backward.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/activation_kind.h"
#include "backend/backend.h"
#include "core/arena.h"

namespace seqtrain {

// Names: "relu", "tanh", "sigmoid", "gelu" (exact erf), "gelu_tanh"; anything else throws an
// Error listing them.
ActKind parse_activation(const std::string& name);
std::string_view activation_name(ActKind k);

// y[i] = f(x[i]) for i < n.
void activation_forward(ActKind k, const float* x, float* y, int64_t n, Backend& backend = default_backend());
// dx[i] = dy[i] * f'(x[i]). ReLU, Tanh and Sigmoid read only y (f' from the output); GELU reads
// only x. Pass both: which one is used is an implementation detail.
void activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx, int64_t n,
                         Backend& backend = default_backend());

struct Activation {
  // backend: where it computes (a model passes its ParamStore's); null = default_backend().
  explicit Activation(ActKind k, Backend* backend = nullptr) : kind(k), backend_(backend) {}
  // Saves views of x and y: both must stay alive until backward (true for arena activations).
  Tensor forward(const Tensor& x, Arena& arena);
  // The same with y in `out`: f32, or bf16 / f16 rounded as it is written, for a 16-bit Linear
  // that follows (nn/linear.h takes such an input as its rounded copy); 16-bit for GELU only (its
  // backward reads x, not y), on a backend that supports(half_output).
  Tensor forward(const Tensor& x, Arena& arena, DType out);
  Tensor backward(const Tensor& dy, Arena& arena);

  ActKind kind;
  Tensor x_saved, y_saved;

 private:
  Backend& backend() const { return backend_ ? *backend_ : default_backend(); }
  Backend* backend_ = nullptr;
};

struct ReLU : Activation { ReLU() : Activation(ActKind::relu) {} };
struct Tanh : Activation { Tanh() : Activation(ActKind::tanh) {} };
struct Sigmoid : Activation { Sigmoid() : Activation(ActKind::sigmoid) {} };
// tanh_approx=false is torch's default (exact erf).
struct GELU : Activation { explicit GELU(bool tanh_approx = false) : Activation(tanh_approx ? ActKind::gelu_tanh : ActKind::gelu) {} };

}  // namespace seqtrain
