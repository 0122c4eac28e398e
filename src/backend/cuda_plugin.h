// The CUDA backend as a run-time plugin. The CUDA code (src/backend/cuda/) is built, when the
// toolkit is found, into its own shared library, libseqtrain_cuda.so beside the executables, and
// loaded here with dlopen on the first request for a GPU. Why a plugin and not a link: seqtrain
// stays one binary that starts on any x86-64 machine, with or without the CUDA libraries (a
// binary linked against libcudart, cuBLASLt and cuDNN does not start where they are missing),
// and a CPU run does not pay the ~0.1 s that loading cuBLASLt and cuDNN costs every process.
// The plugin resolves seqtrain's own symbols (Backend, Error, Tensor, ...) from the executable,
// which exports them (CMakeLists.txt: ENABLE_EXPORTS).
//
// runtime.device: auto | cpu | cuda | cuda:N (config/fields.h) is resolved here: auto is cuda
// when the plugin loads and sees a GPU, cpu otherwise; cuda is the GPU of this process's local
// rank under mpirun (one process per GPU), GPU 0 otherwise.
// The plugin also holds NCCL, the GPUs' collectives: the id rank 0 makes and the communicator
// each rank makes from it (dist/device_communicator.h bootstraps them over MPI).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace seqtrain {

class Backend;
class Communicator;

// What the machine offers: the GPUs the CUDA runtime sees, or why none is usable (no plugin in
// this build, no driver, a driver older than the runtime, no device). Probed once per process.
struct CudaAvailability {
  int devices = 0;
  std::string why_none;  // empty when devices > 0
  std::string plugin;    // the plugin's path, empty when none was found
};
const CudaAvailability& cuda_availability();

// The CUDA backend of GPU `device`, one instance per device for the process. Throws Error with
// the reason and the fix (runtime.device: cpu) when there is no such GPU.
Backend& cuda_backend(int device);

// NCCL's id for a new clique (ncclGetUniqueId's bytes; rank 0 makes it). Error naming the fix when
// the plugin is missing or NCCL fails.
std::vector<char> nccl_unique_id();
// Rank host.rank() of host.world()'s NCCL communicator on GPU `device`, joined to the clique of
// `id`; host serves the collectives on host memory and must outlive it. Blocks until every rank
// has joined; Error naming the rank and the fix when it cannot.
std::unique_ptr<Communicator> nccl_communicator(int device, Communicator& host, const std::vector<char>& id);

// Parses runtime.device ("auto", "cpu", "cuda", "cuda:N"); returns the device index for a CUDA
// choice (auto with a GPU: 0), -1 for the CPU. A malformed value is an Error naming the key.
int resolve_device(std::string_view device);

// The backend name (backend_named) a run uses for runtime.backend and runtime.device: reference
// stays reference (a CPU oracle: any device other than cpu/auto is an Error naming both keys);
// cpu with a device that resolves to GPU N is "cuda:N", else "cpu".
std::string backend_for(std::string_view backend, std::string_view device);

}  // namespace seqtrain
