// GuardedBackend: a test-only Backend whose device memory host code cannot touch. Every operation
// runs on an inner backend (the reference one in the tests), but the buffers it allocates are
// its own mmap'd pages, kept PROT_NONE except while one of its operations or copies runs: a host
// read or write of parameters, gradients or optimizer state that bypasses the seam (nn/params.h's
// host-access contract) faults at the offending line instead of passing silently, the way device
// memory would be unreachable. host_accessible() is false; constructed with protect = false it is
// a host-accessible counting wrapper instead (for "the host path makes no copies" checks). It
// counts allocations, releases and every copy across the seam.
#pragma once
#include <cstddef>
#include <map>

#include "backend/allocation_table.h"
#include "backend/backend.h"

namespace seqtrain::testing {

class GuardedBackend final : public Backend {
 public:
  struct Counts {
    size_t allocations = 0, releases = 0;
    size_t to_host = 0, from_host = 0;              // copy_to_host / copy_from_host calls
    size_t to_host_bytes = 0, from_host_bytes = 0;
    // Operations that hand a value back to the host (l2_norm, the losses' forwards, token_ids),
    // each a synchronization on a GPU; copy_to_host calls are counted in to_host.
    size_t value_reads = 0;
    size_t uploads = 0;  // upload calls (also counted in from_host)
  };

  explicit GuardedBackend(Backend& inner, bool protect = true) : inner_(inner), protect_(protect) {}
  ~GuardedBackend() override;
  GuardedBackend(const GuardedBackend&) = delete;
  GuardedBackend& operator=(const GuardedBackend&) = delete;

  std::string_view name() const override { return "guarded"; }
  SEQTRAIN_BACKEND_OPERATIONS
  void activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) override;
  void layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) override;
  SEQTRAIN_BACKEND_MEMORY
  bool host_accessible() const override { return !protect_; }
  void upload(const void* host_src, void* device_dst, size_t bytes) override;
  void regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                  float delta, double* acc) override;
  void cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) override;
  void clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) override;
  void scale_by(float* x, size_t n, const float* s) override;
  void unscale_grads(float* g, size_t n, LossScaleState* st) override;
  void update_loss_scale(LossScaleState* st, const LossScaleRule& rule) override;
  void adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) override;
  void token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) override;
  // Host reads of any kind: copies to the host and operations that return a value.
  size_t host_reads() const { return counts_.to_host + counts_.value_reads; }

  const Counts& counts() const { return counts_; }
  size_t live_buffers() const { return table_.live_count(); }
  size_t copies() const { return counts_.to_host + counts_.from_host; }

  // Opens this backend's memory to the host for its lifetime (nests): what every operation and
  // copy does around the inner call. Tests use it to look at device memory on purpose.
  class Open {
   public:
    explicit Open(GuardedBackend& b);
    ~Open();
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    GuardedBackend& b_;
  };

 private:
  friend class GuardedRecurrentLayers;
  void protect_all(int prot);

  Backend& inner_;
  bool protect_;
  AllocationTable table_;          // what allocate() returned (range checks, wrong releases)
  std::map<void*, size_t> pages_;  // each allocation's mapping: address -> mapped length
  int open_ = 0;
  Counts counts_;
};

}  // namespace seqtrain::testing
