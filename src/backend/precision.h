// Precision: the run's one mixed-precision policy (runtime.precision), resolved once by whoever
// runs the model (the training loop; load_model for eval, predict, generate and export) and lent
// to the model at build time (ModelEnv, models/model.h). Every layer that follows the policy
// reads it from there — the RNN layers, Linear, the attention op, the GPT's tied head — so no
// model spec and no layer carries a precision of its own, and the step's loss scaling follows the
// same value.
//
// What it means for a layer (torch.autocast's rules): `compute` is the operand type of its matrix
// products; fp32 master weights, gradients, optimizer state, accumulation, normalisation, softmax,
// activations and the loss stay fp32 in every case. bf16 and fp16 round the operands of a product
// (x and W, and in backward the output gradient) to 16 bits and accumulate in fp32. Which layers
// of a model follow it is the model's choice, said in its registry entry (`precision_covers`):
// the RNN models keep their small heads in fp32 (models/forecaster.h), the GPT runs every
// product in `compute`.
#pragma once
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace seqtrain {

struct Precision {
  // Operand type of the matrix products of the layers that follow the policy: f32, bf16 or f16.
  DType compute = DType::f32;
  // The gradients need dynamic loss scaling (fp16: its range ends at 6e-5 below and 65504 above;
  // bf16 has fp32's range and needs none): the training step's LossScaler (optim/loss_scaler.h).
  bool loss_scaling = false;

  bool mixed() const { return compute != DType::f32; }
  bool operator==(const Precision&) const = default;
};

// "fp32", "bf16" or "fp16": the runtime.precision word for a resolved policy.
const char* precision_name(const Precision& p);

// Resolves runtime.precision ("fp32" | "bf16" | "fp16" | "auto") on this machine. "auto" is bf16
// exactly when the CPU has native bf16 dot products, fp32 otherwise; *why (when given) says which
// and why, for the log. An unknown word, and bf16 on a CPU without AVX512-BF16, are an Error
// naming runtime.precision and the accepted values.
Precision resolve_precision(const std::string& runtime_precision, std::string* why = nullptr);
// The same for the backend a run computes on (ModelSpec::backend: "cpu", "reference", "cuda:N"),
// by the rule its device registered (backend/registry.h): a GPU run is judged by the GPU, never
// by the CPU's bf16 support.
Precision resolve_precision(const std::string& runtime_precision, std::string_view backend, std::string* why);
// The GPU's rule (the CUDA registration's): the plugin is built for sm_80 and newer, whose
// tensor cores all multiply bf16 and fp16, so bf16 and fp16 are always accepted and auto is bf16
// (as nanoGPT's recipe on such a GPU).
Precision resolve_gpu_precision(const std::string& runtime_precision, std::string_view backend, std::string* why);

}  // namespace seqtrain
