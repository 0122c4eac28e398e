// HostReadView: n floats of device memory readable by host code — the memory itself when its
// backend is host_accessible() (cpu, reference: no copy, no cost), otherwise a copy downloaded
// once when the view is made. It is a snapshot: later device writes are not seen through a
// copy, so make the view where the host reads (save a file, run a generation step), not once
// for a whole run. Copyable and movable (a copy owns its own floats).
#pragma once
#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace seqtrain {

class HostReadView {
 public:
  HostReadView() = default;
  HostReadView(Backend& backend, const float* device, size_t n) : n_(n) {
    if (backend.host_accessible()) {
      direct_ = device;
    } else {
      copy_.resize(n);
      if (n) backend.copy_to_host(device, copy_.data(), n * sizeof(float));
    }
  }
  const float* data() const { return direct_ ? direct_ : copy_.data(); }
  size_t size() const { return n_; }
  // Whether this view copied (false: it is the device memory itself).
  bool copied() const { return direct_ == nullptr && n_ > 0; }

 private:
  const float* direct_ = nullptr;
  std::vector<float> copy_;
  size_t n_ = 0;
};

}  // namespace seqtrain
