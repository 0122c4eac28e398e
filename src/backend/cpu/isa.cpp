// Instruction-set detection and the SEQTRAIN_ISA cap: see isa.h.
#include "backend/cpu/isa.h"

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "core/error.h"

namespace seqtrain {
namespace {

constexpr Isa kAll[] = {Isa::plain, Isa::avx2, Isa::avx512, Isa::avx512_bf16};

struct Decision {
  Isa isa = Isa::plain;
  std::optional<std::string> error;  // a bad SEQTRAIN_ISA: every active_isa() call throws it
  bool capped = false;
};

std::string accepted() {
  std::string s;
  for (Isa i : kAll) s += std::string(s.empty() ? "" : ", ") + isa_name(i);
  return s;
}

// oneDNN's own ceiling for a level: its JIT kernels then use nothing the level lacks.
dnnl::cpu_isa onednn_isa(Isa isa) {
  switch (isa) {
    case Isa::plain: return dnnl::cpu_isa::sse41;  // oneDNN's lowest JIT level; x86-64 v2
    case Isa::avx2: return dnnl::cpu_isa::avx2;
    case Isa::avx512: return dnnl::cpu_isa::avx512_core;
    case Isa::avx512_bf16: return dnnl::cpu_isa::all;
  }
  return dnnl::cpu_isa::all;
}

Decision decide() {
  Decision d;
  try {
    d.isa = resolve_isa(std::getenv("SEQTRAIN_ISA"), cpu_max_isa());
  } catch (const Error& e) {
    d.error = e.what();
    return d;
  }
  d.capped = d.isa != cpu_max_isa();
  // Must run before oneDNN creates its first kernel; active_isa() is called by every entry to
  // oneDNN (cpu_engine, gemm) for that reason. A failure means oneDNN already ran: the cap is
  // then ours only, which is still correct, merely not a faithful lesser CPU.
  if (d.capped) {
    try {
      dnnl::set_max_cpu_isa(onednn_isa(d.isa));
    } catch (const dnnl::error&) {
    }
  }
  return d;
}

const Decision& decision() {
  static const Decision d = decide();
  return d;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::plain: return "plain";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

Isa parse_isa(const std::string& name, const std::string& origin) {
  for (Isa i : kAll)
    if (name == isa_name(i)) return i;
  fail("{}={} is not an instruction-set level: use one of {} (this CPU supports up to {})", origin, name,
       accepted(), isa_name(cpu_max_isa()));
}

Isa cpu_max_isa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    if (!avx2) return Isa::plain;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (!avx512) return Isa::avx2;
    return __builtin_cpu_supports("avx512bf16") ? Isa::avx512_bf16 : Isa::avx512;
  }();
  return isa;
}

Isa resolve_isa(const char* env, Isa cpu_max) {
  if (env == nullptr || *env == '\0') return cpu_max;
  const Isa want = parse_isa(env, "SEQTRAIN_ISA");
  if (static_cast<int>(want) > static_cast<int>(cpu_max))
    fail("SEQTRAIN_ISA={} asks for more than this CPU has (it supports up to {}): use one of the levels up to {} "
         "({}), or unset SEQTRAIN_ISA",
         env, isa_name(cpu_max), isa_name(cpu_max), accepted());
  return want;
}

Isa active_isa() {
  const Decision& d = decision();
  if (d.error) throw Error(*d.error);
  return d.isa;
}

std::string isa_summary() {
  const Isa isa = active_isa();
  if (decision().capped)
    return fmt::format("{} (capped by SEQTRAIN_ISA={}; this CPU supports up to {})", isa_name(isa), isa_name(isa),
                       isa_name(cpu_max_isa()));
  return fmt::format("{} (the highest this CPU supports)", isa_name(isa));
}

}  // namespace seqtrain
