#include "backend/cpu/dnnl_context.h"

#include <omp.h>
#include <xmmintrin.h>

#include <cstdlib>
#include <thread>

#include "backend/cpu/isa.h"
#include "core/error.h"

namespace seqtrain {

dnnl::primitive_attr matmul_attr(bool accumulate) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.f);
    attr.set_post_ops(po);
  }
  return attr;
}

dnnl::engine& cpu_engine() {
  // active_isa() first: it caps oneDNN's ISA (SEQTRAIN_ISA), which must precede any oneDNN kernel.
  static dnnl::engine engine = (active_isa(), dnnl::engine(dnnl::engine::kind::cpu, 0));
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

int set_cpu_threads(int n) {
  // 0 means: OMP_NUM_THREADS when the user set it, else every core.
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? std::atoi(env) : 0;
    ST_CHECK(n <= 256, "OMP_NUM_THREADS={} asks for more than 256 compute threads; set it to at most this machine's "
             "{} cores, or set runtime.threads", n, std::thread::hardware_concurrency());
  }
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  omp_set_num_threads(n);
  // Flush denormals to zero (FTZ) and read them as zero (DAZ) on every compute thread.
  // Gradients carried back through hundreds of time steps decay into denormals, and Intel
  // cores run denormal arithmetic tens of times slower: W2's backward took 25 s instead of
  // 0.7 s on a Xeon before this. Values below 1e-38 do not matter to training.
#pragma omp parallel num_threads(n)
  _mm_setcsr(_mm_getcsr() | 0x8040);
  _mm_setcsr(_mm_getcsr() | 0x8040);
  return n;
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace seqtrain
