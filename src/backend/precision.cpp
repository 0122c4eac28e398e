// runtime.precision's resolution into the run's Precision policy. See precision.h.
#include "backend/precision.h"

#include "backend/cpu/gemm_bf16.h"
#include "core/error.h"

namespace seqtrain {

const char* precision_name(const Precision& p) {
  return p.compute == DType::bf16 ? "bf16" : p.compute == DType::f16 ? "fp16" : "fp32";
}

Precision resolve_precision(const std::string& precision, std::string* why) {
  auto say = [&](const std::string& w) { if (why) *why = w; };
  if (precision == "fp32") {
    say("precision fp32: as configured");
    return Precision{};
  }
  if (precision == "bf16") {
    ST_CHECK(cpu_has_native_bf16(), "runtime.precision bf16 needs a CPU with AVX512-BF16, which this one lacks: use "
             "runtime.precision fp32 (or auto)");
    say("precision bf16: as configured (CPU has native bf16)");
    return Precision{.compute = DType::bf16};
  }
  if (precision == "fp16") {
    say(std::string("precision fp16: as configured, with dynamic loss scaling; fp16 is emulated on this CPU "
                    "(oneDNN has no fp16 matmul without AVX512-FP16): fp16's numerics, not its speed, slower than "
                    "fp32 here") +
        (cpu_has_native_bf16() ? "; bf16 is the fast choice on this CPU" : ""));
    return Precision{.compute = DType::f16, .loss_scaling = true};
  }
  if (precision == "auto") {
    const bool bf = cpu_has_native_bf16();
    say(bf ? "precision auto -> bf16: the CPU has native bf16 dot products (AVX512-BF16)"
           : "precision auto -> fp32: the CPU has no native bf16 (AVX512-BF16)");
    return bf ? Precision{.compute = DType::bf16} : Precision{};
  }
  fail("runtime.precision '{}' is not known: use fp32, bf16, fp16 or auto", precision);
}

Precision resolve_gpu_precision(const std::string& precision, std::string_view backend, std::string* why) {
  auto say = [&](const std::string& w) { if (why) *why = w; };
  const std::string gpu(backend);
  if (precision == "fp32") {
    say("precision fp32 on " + gpu + ": as configured (strict fp32, no TF32)");
    return Precision{};
  }
  if (precision == "bf16" || precision == "auto") {
    say("precision " + precision + (precision == "auto" ? " -> bf16" : "") + " on " + gpu +
        ": bf16 operands on the GPU's tensor cores, fp32 accumulation");
    return Precision{.compute = DType::bf16};
  }
  if (precision == "fp16") {
    say("precision fp16 on " + gpu + ": fp16 operands on the GPU's tensor cores, with dynamic loss scaling");
    return Precision{.compute = DType::f16, .loss_scaling = true};
  }
  return resolve_precision(precision, why);  // the unknown word's error
}

}  // namespace seqtrain
