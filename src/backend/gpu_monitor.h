// GpuMonitor: what nvidia-smi shows for one GPU (utilisation, memory in use, power draw), sampled
// through NVML for the metrics log of a CUDA run. NVML is the driver's libnvidia-ml.so.1, loaded
// with dlopen on first use, never linked: a machine without the driver (every CPU-only machine)
// runs as before, the monitor just reports why it has nothing. Sampling is a few microseconds of
// driver calls, so the loop samples at each step record, not each step.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace seqtrain {

struct GpuSample {
  double utilisation = 0;   // percent of the last sample period with a kernel running (0..100)
  double memory_used_mb = 0;
  double memory_total_mb = 0;
  double power_w = 0;       // 0 where the GPU does not report power
};

class GpuMonitor {
 public:
  // Loads NVML (SEQTRAIN_NVML_LIBRARY names the library, libnvidia-ml.so.1 otherwise) and opens
  // GPU `index` (NVML's numbering, which is CUDA's unless CUDA_VISIBLE_DEVICES reorders them).
  explicit GpuMonitor(int index);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  bool available() const { return device_ != nullptr; }
  // Why available() is false: the library is missing, a symbol is missing, NVML's own error.
  const std::string& why_unavailable() const { return why_; }
  // A sample now, or nothing when unavailable or when the driver refuses the query.
  std::optional<GpuSample> sample() const;

 private:
  struct Api;
  void* library_ = nullptr;
  Api* api_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  std::string why_;
};

}  // namespace seqtrain
