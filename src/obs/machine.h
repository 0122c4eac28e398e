// Machine: what `seqtrain diagnose` says about the computer a job would train on — the CPU, the
// kernel level seqtrain runs it at, its cores, RAM and GPUs — read from the same places the
// trainer decides by (backend/cpu/isa.h, data/loader.h's core and RAM counts, the CUDA plugin),
// so that what diagnose prints is what a run will meet.
#pragma once
#include <cstdint>
#include <string>

namespace seqtrain {

struct Machine {
  std::string cpu;         // /proc/cpuinfo's model name ("unknown CPU" when unreadable)
  std::string isa;         // isa_summary(): the kernel level and why
  int64_t cores = 0;       // hardware threads (what data.workers auto and runtime.threads 0 count)
  int64_t ram_total = 0, ram_available = 0;  // bytes; 0 when /proc/meminfo is unreadable
  int gpus = 0;            // GPUs the CUDA plugin sees
  std::string gpu_note;    // the plugin's path, or why no GPU is usable
};

Machine probe_machine();


}  // namespace seqtrain
