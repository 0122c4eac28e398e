// The machine a job would train on: see machine.h.
#include "obs/machine.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "backend/cpu/isa.h"
#include "backend/cuda_plugin.h"
#include "data/loader.h"

namespace seqtrain {

namespace {
// The value of `key` in a "key : value" file (/proc/cpuinfo, /proc/meminfo), or empty.
std::string proc_value(const char* path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return {};
}
}  // namespace

Machine probe_machine() {
  Machine m;
  m.cpu = proc_value("/proc/cpuinfo", "model name");
  if (m.cpu.empty()) m.cpu = "unknown CPU";
  m.isa = isa_summary();
  m.cores = system_cores();
  std::istringstream total(proc_value("/proc/meminfo", "MemTotal"));
  int64_t kb = 0;
  if (total >> kb) m.ram_total = kb * 1024;
  m.ram_available = system_available_ram();
  const CudaAvailability& cuda = cuda_availability();
  m.gpus = cuda.devices;
  m.gpu_note = cuda.devices > 0 ? "CUDA plugin " + cuda.plugin : cuda.why_none;
  return m;
}

}  // namespace seqtrain
