// ReferenceBackend: the Backend seam implemented as the plainest loops that are still right:
// fp32 storage, fp64 accumulation in every GEMM, reduction and norm, the recurrent layer as a
// loop over time steps written straight from PyTorch's LSTM/GRU equations, attention with the
// whole score matrix per head (reference_attention.cpp). No oneDNN, no
// threads, no tuning. It exists to be the oracle: the CPU backend's kernels, and the CUDA
// backend after them, are tested against it (tests/test_backend.cpp). Anything it does not do
// (16-bit GEMMs and attention, mixed-precision or checkpointed recurrent layers) is a seqtrain::Error naming
// the operation, never a quiet fallback to another path. Its device memory is plain host memory
// from plain operator new (HostMemoryBackend at its default alignment), not the CPU backend's
// aligned one, so tests that mix the two would see a buffer go back to the wrong backend.
// It does convert f32 <-> bf16 / f16: the roundings' definition, with which tests build the
// oracle of a 16-bit GEMM (the rounded operands widened back and multiplied here in fp64: a bf16
// product is exact in fp32).
#pragma once
#include "backend/host_memory_backend.h"

namespace seqtrain {

class ReferenceBackend final : public HostMemoryBackend {
 public:
  std::string_view name() const override { return "reference"; }
  SEQTRAIN_BACKEND_ROW_AND_LAYER_OPS
  void dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) override;
};

}  // namespace seqtrain
