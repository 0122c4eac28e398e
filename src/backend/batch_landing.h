// BatchLanding: where a training step's batch lands on a device with a copy lane
// (Backend::has_copy_lane: a GPU's second stream), so that batch k+1 is copied while step k
// computes instead of queueing behind it.
//
// Two device buffers alternate step by step: batch k+1 lands in the one step k does not read.
// Before its copies the copy lane waits for the compute lane's mark taken when batch k landed,
// the end of step k-1 (that buffer's last reader), never for step k; the compute lane's later
// work (step k+1) waits for the copy lane's mark after the batch. The host waits for neither:
// land() returns once the copies are queued. Tensors in the loader's page-locked slots are read
// by the copy directly (the slot is refilled only after it, backend/pinned_buffers.h); the
// backend stages the others.
//
// A captured step (train/step_graphs.h) reads its batch at the addresses of its capture, and the
// landing buffers alternate: staged() copies the landed batch on the compute lane, one device
// copy, into one block of the step's arena laid out as the landing buffer, at the same addresses
// every step of a shape. The other choice, a capture per landing buffer, would double the
// captures, their graph memory and the per-shape bookkeeping (warm-up, staleness, refusals) to
// save one device-to-device copy of the batch, small next to a step.
#pragma once
#include <cstddef>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "core/arena.h"
#include "core/batch.h"

namespace seqtrain {

class BatchLanding {
 public:
  explicit BatchLanding(Backend& backend) : be_(backend) {}
  // Queues the copies of host's tensors into the next landing buffer (grown to fit when needed)
  // and orders the compute lane's later work after them. landed() is the batch there.
  void land(const Batch& host);
  // The last land()'s batch: host's fields, its tensors in the landing buffer.
  const Batch& landed() const { return landed_; }
  // The landed batch copied into one block of `arena`, queued on the compute lane.
  Batch staged(Arena& arena) const;
  // The landing buffer the last land() used (0 or 1), and its memory.
  int buffer() const { return 1 - next_; }
  const void* buffer_data(int i) const { return buf_[i].data(); }

 private:
  Backend& be_;
  DeviceBuffer buf_[2];
  // The compute lane's mark after the last step that read each buffer.
  Backend::LaneMark read_[2];
  int next_ = 0;
  Batch landed_;
  size_t bytes_ = 0;  // the landed tensors' extent in their buffer (a multiple of kAlign)
};

}  // namespace seqtrain
