// The instruction-set level the CPU kernels run at, chosen once per process.
//
// seqtrain is one portable x86-64 binary: its own kernels (backend/cpu/kernels/) are compiled
// once per level and the level picked here at start-up, as oneDNN picks its own JIT kernels.
// The level is the highest the CPU (and the OS, for the AVX-512 registers) supports, lowered by
// the environment variable SEQTRAIN_ISA when set, so that a machine with AVX-512 can run the
// AVX2 or plain kernels (and the whole test suite) as an AVX2-only machine would. The cap also
// applies to oneDNN (dnnl::set_max_cpu_isa) and to what counts as native bf16, so a capped run
// behaves like a run on the lesser CPU. A path the CPU lacks is never entered.
#pragma once
#include <string>

namespace seqtrain {

// Ordered: each level includes the ones below it.
//   plain        x86-64 baseline (SSE2), 4-float vectors
//   avx2         AVX2 + FMA + F16C, 8-float vectors
//   avx512       AVX-512 F/BW/DQ/VL (+ AVX2, FMA, F16C), 16-float vectors
//   avx512_bf16  avx512 + AVX512-BF16 (native bf16 conversion and dot products)
enum class Isa { plain = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };

const char* isa_name(Isa isa);
// "plain" | "avx2" | "avx512" | "avx512_bf16"; anything else is a seqtrain::Error naming
// `origin` (e.g. "SEQTRAIN_ISA") and listing the accepted values and what this CPU supports.
Isa parse_isa(const std::string& name, const std::string& origin);
// The highest level this CPU and OS support.
Isa cpu_max_isa();
// The level a process runs at on a CPU supporting up to cpu_max, given SEQTRAIN_ISA's value
// (null or empty: not set). An unknown value or one above cpu_max is a seqtrain::Error that
// lists the accepted values and what this CPU supports.
Isa resolve_isa(const char* env, Isa cpu_max);
// The level the kernels run at: cpu_max_isa(), capped by SEQTRAIN_ISA. Decided on the first
// call, which also caps oneDNN; a value above what the CPU has is a seqtrain::Error (thrown by
// every call, so no kernel ever runs on a bad setting).
Isa active_isa();
// For the start-up log and the run's metadata, e.g. "avx2 (capped by SEQTRAIN_ISA=avx2; this CPU
// supports avx512_bf16)" or "avx512_bf16 (the highest this CPU supports)".
std::string isa_summary();

}  // namespace seqtrain
