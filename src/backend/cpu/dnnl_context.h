// The process-wide oneDNN CPU engine and stream, and the thread count every CPU kernel uses.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace seqtrain {

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// Sets the intra-op thread count for oneDNN and our OpenMP loops; 0 means OMP_NUM_THREADS if
// set, else all cores; and
// turns on flush-to-zero for denormals in those threads. Returns the count in effect.
int set_cpu_threads(int n);
int cpu_threads();

}  // namespace seqtrain
