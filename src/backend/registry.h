// The backend registry: how a backend name ("cpu", "reference", "cuda:N") becomes a Backend and
// what a run on it resolves by the device rather than by the CPU. Each device's entry is written
// beside its implementation (cpu/cpu_backend.cpp, reference/reference_backend.cpp, and
// cuda_plugin.cpp for the CUDA plugin's GPUs) and handed to the registry by the register_*
// function below when the registry is first used (no static-initialiser order to depend on),
// so no other file constructs a backend or tests a device name: backend_named (backend.h) looks the name up here, the training loop asks
// gpu_ordinal for its GPU monitor, and resolve_precision (precision.h) asks the device's
// precision rule.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/precision.h"

namespace seqtrain {

class Communicator;

struct BackendEntry {
  // The names this entry serves: exactly `name`, or with `prefix` every name starting with it.
  std::string name;
  bool prefix = false;
  // The process's backend for a served name (one instance per name; made on first use).
  std::function<Backend&(std::string_view name)> make;
  // runtime.precision on this device (the CPU's rules when null).
  std::function<Precision(const std::string& word, std::string_view name, std::string* why)> precision;
  // The GPU index of a served name (its monitor's device), or -1 for a device that is no GPU.
  std::function<int(std::string_view name)> gpu_ordinal;
  // A data-parallel run's collectives on this device's memory (the GPUs: NCCL), made by
  // dist/device_communicator.h: the bootstrap id the primary rank makes, and each rank's
  // communicator from it over `host` (which serves host memory and outlives it). Null for a
  // device whose memory is the host's: the host communicator (MPI) serves it.
  std::function<std::vector<char>()> comm_id;
  std::function<std::unique_ptr<Communicator>(std::string_view name, Communicator& host, const std::vector<char>& id)>
      communicator;
};

// Adds an entry (a device added at run time, a test's instrumented backend); a second entry for
// the same name is an Error.
void register_backend(BackendEntry entry);
// The built-in devices' entries, each defined beside its backend.
BackendEntry cpu_backend_entry();
BackendEntry reference_backend_entry();
BackendEntry cuda_backend_entry();
// The entry that serves `name`; an unknown name is an Error listing the known ones.
const BackendEntry& backend_entry(std::string_view name);
// The GPU index of the backend's device, or -1 (the CPU, the reference oracle).
int gpu_ordinal(const Backend& backend);

}  // namespace seqtrain
