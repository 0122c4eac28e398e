// NVML through dlopen: see gpu_monitor.h. The few NVML declarations needed are written here (the
// driver's nvml.h is not a build dependency); they follow NVML's stable C ABI: functions return
// nvmlReturn_t (0 = success), the _v2 entry points exist since driver 325.
#include "backend/gpu_monitor.h"

#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>

namespace seqtrain {

namespace {
using nvmlReturn = int;
using nvmlDevice = void*;
struct NvmlUtilization { unsigned gpu, memory; };
struct NvmlMemory { unsigned long long total, free, used; };
}  // namespace

struct GpuMonitor::Api {
  nvmlReturn (*init)();
  nvmlReturn (*shutdown)();
  const char* (*error_string)(nvmlReturn);
  nvmlReturn (*handle_by_index)(unsigned, nvmlDevice*);
  nvmlReturn (*utilization)(nvmlDevice, NvmlUtilization*);
  nvmlReturn (*memory)(nvmlDevice, NvmlMemory*);
  nvmlReturn (*power)(nvmlDevice, unsigned*);
};

namespace {

template <class F>
bool bind(void* lib, const char* name, F& f, std::string& why) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) why = fmt::format("the NVML library has no {} (not NVML, or a driver too old)", name);
  return f != nullptr;
}

}  // namespace

GpuMonitor::GpuMonitor(int index) {
  const char* env = std::getenv("SEQTRAIN_NVML_LIBRARY");
  const std::string path = env && *env ? env : "libnvidia-ml.so.1";
  library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    why_ = fmt::format("NVML ({}) could not be loaded: {}; GPU utilisation, memory and power are not logged",
                       path, dlerror());
    return;
  }
  Api a{};
  if (!bind(library_, "nvmlInit_v2", a.init, why_) || !bind(library_, "nvmlShutdown", a.shutdown, why_) ||
      !bind(library_, "nvmlErrorString", a.error_string, why_) ||
      !bind(library_, "nvmlDeviceGetHandleByIndex_v2", a.handle_by_index, why_) ||
      !bind(library_, "nvmlDeviceGetUtilizationRates", a.utilization, why_) ||
      !bind(library_, "nvmlDeviceGetMemoryInfo", a.memory, why_) ||
      !bind(library_, "nvmlDeviceGetPowerUsage", a.power, why_))
    return;
  if (nvmlReturn r = a.init(); r != 0) {
    why_ = fmt::format("NVML did not start: {}", a.error_string(r));
    return;
  }
  api_ = new Api(a);
  nvmlDevice dev = nullptr;
  if (nvmlReturn r = a.handle_by_index(static_cast<unsigned>(index), &dev); r != 0) {
    why_ = fmt::format("NVML has no GPU {}: {}", index, a.error_string(r));
    return;
  }
  device_ = dev;
}

GpuMonitor::~GpuMonitor() {
  if (api_) api_->shutdown();
  delete api_;
  if (library_) dlclose(library_);
}

std::optional<GpuSample> GpuMonitor::sample() const {
  if (!device_) return std::nullopt;
  NvmlUtilization u{};
  NvmlMemory m{};
  if (api_->utilization(device_, &u) != 0 || api_->memory(device_, &m) != 0) return std::nullopt;
  GpuSample s;
  s.utilisation = u.gpu;
  s.memory_used_mb = static_cast<double>(m.used) / (1 << 20);
  s.memory_total_mb = static_cast<double>(m.total) / (1 << 20);
  unsigned mw = 0;
  if (api_->power(device_, &mw) == 0) s.power_w = mw / 1000.0;
  return s;
}

}  // namespace seqtrain
