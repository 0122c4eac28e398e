// Finding, loading and checking the CUDA plugin: see cuda_plugin.h.
#include "backend/cuda_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/plugin_abi.h"
#include "backend/registry.h"
#include "core/error.h"
#include "train/communicator.h"

namespace seqtrain {
namespace {

// The plugin's entry points (backend/cuda/plugin_abi.h).
struct Plugin {
  void* handle = nullptr;
  std::string path;
  decltype(&seqtrain_cuda_abi) abi = nullptr;
  decltype(&seqtrain_cuda_device_count) device_count = nullptr;
  decltype(&seqtrain_cuda_backend) backend = nullptr;
  decltype(&seqtrain_nccl_unique_id) nccl_id = nullptr;
  decltype(&seqtrain_nccl_communicator) nccl_comm = nullptr;
};

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

// SEQTRAIN_CUDA_PLUGIN names the library; otherwise it is looked for beside the executable.
std::string plugin_path() {
  if (const char* p = std::getenv("SEQTRAIN_CUDA_PLUGIN"); p && *p) return p;
  return executable_dir() + "/libseqtrain_cuda.so";
}

// Loads the plugin once; `why` gets the reason when it cannot be used.
const Plugin* load_plugin(std::string& why) {
  static std::once_flag once;
  static Plugin plugin;
  static std::string failure;
  std::call_once(once, [] {
    const std::string path = plugin_path();
    if (!std::filesystem::exists(path)) {
      failure = fmt::format("this seqtrain has no CUDA backend: {} is missing (it is built only when the CUDA "
                            "toolkit is found at build time)", path);
      return;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      failure = fmt::format("the CUDA backend {} could not be loaded: {}", path, dlerror());
      return;
    }
    Plugin p;
    p.handle = h;
    p.path = path;
    p.abi = reinterpret_cast<decltype(p.abi)>(dlsym(h, "seqtrain_cuda_abi"));
    p.device_count = reinterpret_cast<decltype(p.device_count)>(dlsym(h, "seqtrain_cuda_device_count"));
    p.backend = reinterpret_cast<decltype(p.backend)>(dlsym(h, "seqtrain_cuda_backend"));
    p.nccl_id = reinterpret_cast<decltype(p.nccl_id)>(dlsym(h, "seqtrain_nccl_unique_id"));
    p.nccl_comm = reinterpret_cast<decltype(p.nccl_comm)>(dlsym(h, "seqtrain_nccl_communicator"));
    if (!p.abi || !p.device_count || !p.backend || !p.nccl_id || !p.nccl_comm) {
      failure = fmt::format("{} is not a seqtrain CUDA plugin (an entry point is missing)", path);
      return;
    }
    if (p.abi() != kCudaPluginAbi) {
      failure = fmt::format("{} was built from another seqtrain version (plugin ABI {}, this binary {}): rebuild "
                            "both from one tree", path, p.abi(), kCudaPluginAbi);
      return;
    }
    plugin = p;
  });
  why = failure;
  return failure.empty() ? &plugin : nullptr;
}

// The plugin for NCCL's entries; an Error naming the key and the fix when it cannot load.
const Plugin& nccl_plugin() {
  std::string why;
  const Plugin* p = load_plugin(why);
  ST_CHECK(p, "runtime.device asks for a GPU under mpirun (NCCL's collectives) but {}. Fix: runtime.device: cpu", why);
  return *p;
}

// This process's rank among the launcher's processes on this machine (OpenMPI, MPICH, Slurm); 0
// when no launcher says.
int launcher_local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return 0;
}

}  // namespace

const CudaAvailability& cuda_availability() {
  static const CudaAvailability a = [] {
    CudaAvailability r;
    const Plugin* p = load_plugin(r.why_none);
    if (!p) return r;
    r.plugin = p->path;
    char why[512] = {0};
    r.devices = p->device_count(why, sizeof why);
    if (r.devices <= 0) {
      r.devices = 0;
      r.why_none = why[0] ? why : "the CUDA runtime sees no GPU";
    }
    return r;
  }();
  return a;
}

Backend& cuda_backend(int device) {
  const CudaAvailability& a = cuda_availability();
  ST_CHECK(a.devices > 0, "runtime.device asks for cuda:{} but no GPU can be used: {}. Fix: runtime.device: cpu "
           "(or auto, which falls back to the CPU)", device, a.why_none);
  ST_CHECK(device >= 0 && device < a.devices, "runtime.device asks for cuda:{} but this machine has {} GPU(s) "
           "(cuda:0..cuda:{}): pick one of them", device, a.devices, a.devices - 1);
  static std::mutex mu;
  static std::map<int, Backend*> backends;
  std::lock_guard<std::mutex> lock(mu);
  Backend*& b = backends[device];
  if (!b) {
    std::string why;
    char err[512] = {0};
    b = load_plugin(why)->backend(device, err, sizeof err);
    ST_CHECK(b, "the CUDA backend for cuda:{} could not start: {}. Fix: runtime.device: cpu", device, err);
  }
  return *b;
}

std::vector<char> nccl_unique_id() {
  std::vector<char> id(512);
  char err[512] = {0};
  const size_t n = nccl_plugin().nccl_id(id.data(), id.size(), err, sizeof err);
  ST_CHECK(n > 0, "NCCL could not make the run's id: {}. Fix: runtime.device: cpu (MPI on the CPU)", err);
  id.resize(n);
  return id;
}

std::unique_ptr<Communicator> nccl_communicator(int device, Communicator& host, const std::vector<char>& id) {
  char err[512] = {0};
  Communicator* c = nccl_plugin().nccl_comm(device, &host, id.data(), id.size(), err, sizeof err);
  ST_CHECK(c, "rank {} of {} could not join NCCL on cuda:{}: {}. Fix: one process per GPU (at most as many ranks on "
           "a machine as it has GPUs), or runtime.device: cpu", host.rank(), host.world(), device, err);
  return std::unique_ptr<Communicator>(c);
}

int resolve_device(std::string_view device) {
  if (device == "cpu") return -1;
  // One process per GPU: under a launcher the local rank's GPU, else the first.
  const int local = launcher_local_rank();
  if (device == "auto" && cuda_availability().devices == 0) return -1;
  if (device == "auto" || device == "cuda") {
    ST_CHECK(local == 0 || local < cuda_availability().devices, "runtime.device {}: this process is rank {} on its "
             "machine, which has {} GPU(s): one process per GPU, so start at most that many ranks a machine "
             "(mpirun --map-by ppr:N:node), or set runtime.device: cpu", device, local, cuda_availability().devices);
    return local;
  }
  if (device.substr(0, 5) == "cuda:" && device.size() > 5 && device.size() <= 8) {
    int n = 0;
    for (char c : device.substr(5)) {
      ST_CHECK(c >= '0' && c <= '9', "config key 'runtime.device' is '{}': accepted values are auto, cpu, cuda and "
               "cuda:N (N a GPU index, e.g. cuda:0)", device);
      n = n * 10 + (c - '0');
    }
    return n;
  }
  fail("config key 'runtime.device' is '{}': accepted values are auto, cpu, cuda and cuda:N (N a GPU index, e.g. "
       "cuda:0)", device);
}

std::string backend_for(std::string_view backend, std::string_view device) {
  if (backend == "reference") {
    ST_CHECK(device == "cpu" || device == "auto", "config key 'runtime.device' is '{}' but runtime.backend is "
             "reference, the CPU oracle: set runtime.device: cpu, or runtime.backend: cpu", device);
    return "reference";
  }
  const int d = resolve_device(device);
  return d < 0 ? std::string(backend) : fmt::format("cuda:{}", d);
}

// The GPUs, "cuda:N", through the plugin: the GPU's precision rule, and N as the monitor's GPU.
BackendEntry cuda_backend_entry() {
  BackendEntry e;
  e.name = "cuda";
  e.prefix = true;
  e.make = [](std::string_view name) -> Backend& { return cuda_backend(resolve_device(name)); };
  e.precision = resolve_gpu_precision;
  e.gpu_ordinal = [](std::string_view name) { return resolve_device(name); };
  e.comm_id = nccl_unique_id;
  e.communicator = [](std::string_view name, Communicator& host, const std::vector<char>& id) {
    return nccl_communicator(resolve_device(name), host, id);
  };
  return e;
}

}  // namespace seqtrain
