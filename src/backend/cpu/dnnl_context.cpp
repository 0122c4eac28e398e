#include "backend/cpu/dnnl_context.h"

#include <omp.h>

#include <thread>

namespace seqtrain {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

int set_cpu_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  omp_set_num_threads(n);
  return n;
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace seqtrain
