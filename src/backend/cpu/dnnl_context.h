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

// Attributes of seqtrain's cached matmul primitives: a user scratchpad (allocated once with the
// primitive, not by oneDNN on every execution, where it showed up as page faults and munmap in
// profiles) and, when accumulate, C += A B through a sum post-op.
dnnl::primitive_attr matmul_attr(bool accumulate);

}  // namespace seqtrain
