#include "backend/batch_landing.h"

#include "backend/device_batch.h"

namespace seqtrain {
namespace {

// Each tensor at a multiple of this in its buffer: as aligned as cudaMalloc's own buffers (what
// the GEMMs' fastest kernels want), and the extent a whole number of floats for staged()'s copy.
constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void BatchLanding::land(const Batch& host) {
  using Lane = Backend::Lane;
  const int b = next_;
  next_ = 1 - next_;
  // The compute lane so far is every step before this batch's: the other buffer's last reader.
  read_[1 - b] = be_.mark(Lane::compute);
  landed_ = host;
  bytes_ = 0;
  for (Tensor* t : batch_tensors(landed_))
    if (needs_copy(*t, be_)) bytes_ += aligned(t->nbytes());
  if (buf_[b].size() * sizeof(float) < bytes_) {
    // Freeing device memory waits for the device (CudaBackend::release), its readers included.
    buf_[b] = DeviceBuffer();
    buf_[b] = DeviceBuffer(be_, bytes_ / sizeof(float), /*zero=*/false);
    read_[b] = {};
  }
  be_.wait(Lane::copy, read_[b]);
  char* at = reinterpret_cast<char*>(buf_[b].data());
  for (Tensor* t : batch_tensors(landed_)) {
    if (!needs_copy(*t, be_)) continue;
    be_.upload_async(t->ptr, at, t->nbytes());
    t->ptr = at;
    at += aligned(t->nbytes());
  }
  be_.wait(Lane::compute, be_.mark(Lane::copy));
}

Batch BatchLanding::staged(Arena& arena) const {
  Batch b = landed_;
  if (bytes_ == 0) return b;
  const int i = buffer();
  const char* from = reinterpret_cast<const char*>(buf_[i].data());
  char* to = static_cast<char*>(arena.alloc(bytes_));
  be_.copy(buf_[i].data(), reinterpret_cast<float*>(to), bytes_ / sizeof(float));
  for (Tensor* t : batch_tensors(b))
    if (needs_copy(*t, be_)) t->ptr = to + (static_cast<const char*>(t->ptr) - from);
  return b;
}

}  // namespace seqtrain
