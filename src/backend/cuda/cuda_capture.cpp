// CudaBackend's capture (backend.h, "Capture"): a training step recorded from the backend's
// stream into a CUDA graph and replayed with one cudaGraphLaunch, so a small model's step is no
// longer bound by launching its hundreds of kernels one by one. The graph bakes in every pointer
// it was captured with: the caller (train/step_graphs.h) keeps the batch and the optimizer's
// scalars at fixed device addresses, and a graph is refused once memory it may read has been
// freed (releases_).
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace seqtrain::cuda {

void CudaBackend::refuse_while_capturing(const char* what) const {
  ST_CHECK(!capturing_, "{}: {} while a step is being captured (runtime.cuda_graphs); it cannot be part of a "
           "CUDA graph", name_, what);
}

// Thread-local mode: a call of this thread that could not be replayed (cudaMalloc, a stream
// synchronization) fails at once, and the capture with it, instead of being silently skipped.
void CudaBackend::begin_capture() {
  ST_CHECK(!capturing_, "internal error: {}: a capture began inside another", name_);
  ST_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
}

uint64_t CudaBackend::end_capture() {
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  ST_CUDA(cudaStreamEndCapture(stream_, &graph));
  Graph g;
  const cudaError_t e = cudaGraphInstantiate(&g.exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  ST_CUDA(e);
  g.releases = releases_;
  graphs_[next_graph_] = g;
  return next_graph_++;
}

// The stream leaves capture mode whatever state the failed capture left it in; the errors that
// ending an invalidated capture reports are the failure already being handled, and cleared.
void CudaBackend::abort_capture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream_, &graph);
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
}

bool CudaBackend::replay(uint64_t capture) {
  const auto it = graphs_.find(capture);
  ST_CHECK(it != graphs_.end(), "internal error: {}: no capture {}", name_, capture);
  if (it->second.releases != releases_) return false;
  ST_CUDA(cudaGraphLaunch(it->second.exec, stream_));
  return true;
}

// Rare (a stale graph, the step's end): waiting for a launch of it that may still be queued
// costs nothing that matters.
void CudaBackend::drop(uint64_t capture) {
  const auto it = graphs_.find(capture);
  if (it == graphs_.end()) return;
  synchronize();
  ST_CUDA(cudaGraphExecDestroy(it->second.exec));
  graphs_.erase(it);
}

}  // namespace seqtrain::cuda
