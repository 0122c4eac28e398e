#include "backend/device_batch.h"

#include <cstring>

namespace seqtrain {

namespace {

// host into the arena by one upload (queued: the step does not wait for it); an empty tensor stays empty.
Tensor copied(const Tensor& host, Arena& arena, Backend& backend) {
  if (!needs_copy(host, backend)) return host;
  Tensor dev = arena.tensor(host.shape, host.dtype);
  dev.device = host.device;
  backend.upload(host.ptr, dev.ptr, host.nbytes());
  return dev;
}

Batch copied(const Batch& host, Arena& arena, Backend& backend) {
  Batch b = host;
  for (Tensor* t : batch_tensors(b)) *t = copied(*t, arena, backend);
  return b;
}

}  // namespace

bool needs_copy(const Tensor& host, const Backend& backend) {
  if (host.ptr == nullptr || host.numel() == 0) return false;
  ST_CHECK(host.contiguous(), "a batch tensor {} must be contiguous to be copied to the {} backend",
           shape_str(host.shape), backend.name());
  return true;
}

Tensor device_tensor(const Tensor& host, Arena& arena, Backend& backend) {
  return backend.host_accessible() ? host : copied(host, arena, backend);
}

void read_floats(Backend& backend, const Tensor& t, float* host) {
  ST_CHECK(t.contiguous() && t.dtype == DType::f32, "read_floats needs a contiguous f32 tensor, got {} {}",
           dtype_name(t.dtype), shape_str(t.shape));
  if (t.numel() == 0) return;
  if (backend.host_accessible()) std::memcpy(host, t.ptr, t.nbytes());
  else backend.copy_to_host(t.ptr, host, t.nbytes());
}

Batch device_batch(const Batch& host, Arena& arena, Backend& backend) {
  return backend.host_accessible() ? host : copied(host, arena, backend);
}

Batch staged_batch(const Batch& host, Arena& arena, Backend& backend) { return copied(host, arena, backend); }

}  // namespace seqtrain
