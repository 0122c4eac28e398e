// Picks the kernel table of the active instruction-set level: see cpu_kernels.h.
#include "backend/cpu/cpu_kernels.h"

#include "core/error.h"

namespace seqtrain {

// Each defined by kernels/table.cpp compiled for its level (CMakeLists.txt).
namespace isa_plain { extern const CpuKernels kKernels; }
namespace isa_avx2 { extern const CpuKernels kKernels; }
namespace isa_avx512 { extern const CpuKernels kKernels; }
namespace isa_avx512_bf16 { extern const CpuKernels kKernels; }

const CpuKernels& cpu_kernels(Isa isa) {
  const Isa active = active_isa();
  ST_CHECK(static_cast<int>(isa) <= static_cast<int>(active),
           "the {} kernels were asked for, but this process runs at {} (SEQTRAIN_ISA or the CPU): "
           "only levels up to it can run",
           isa_name(isa), isa_name(active));
  switch (isa) {
    case Isa::plain: return isa_plain::kKernels;
    case Isa::avx2: return isa_avx2::kKernels;
    case Isa::avx512: return isa_avx512::kKernels;
    case Isa::avx512_bf16: return isa_avx512_bf16::kKernels;
  }
  fail("unknown instruction-set level {}", static_cast<int>(isa));
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels& active = cpu_kernels(active_isa());
  return active;
}

}  // namespace seqtrain
