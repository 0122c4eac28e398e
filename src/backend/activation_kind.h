// ActKind: the elementwise activations (nn/activation.h's layer, the Backend's activation op).
// GELU comes in both of torch's forms: gelu is the exact 0.5 x (1 + erf(x / sqrt 2))
// (torch.nn.GELU(), approximate='none'); gelu_tanh is the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh', GPT-2's).
#pragma once
#include <cstdint>

namespace seqtrain {

enum class ActKind : uint8_t { relu, tanh, sigmoid, gelu, gelu_tanh };

}  // namespace seqtrain
