#include "backend/device_batch.h"

#include <cstring>

namespace seqtrain {

namespace {

// host into the arena by one upload (queued: the step does not wait for it); an empty tensor stays empty.
Tensor copied(const Tensor& host, Arena& arena, Backend& backend) {
  if (host.ptr == nullptr || host.numel() == 0) return host;
  ST_CHECK(host.contiguous(), "a batch tensor {} must be contiguous to be copied to the {} backend",
           shape_str(host.shape), backend.name());
  Tensor dev = arena.tensor(host.shape, host.dtype);
  dev.device = host.device;
  backend.upload(host.ptr, dev.ptr, host.nbytes());
  return dev;
}

Batch copied(const Batch& host, Arena& arena, Backend& backend) {
  Batch b = host;
  b.inputs = copied(host.inputs, arena, backend);
  b.targets = copied(host.targets, arena, backend);
  b.lengths = copied(host.lengths, arena, backend);
  b.key_padding_mask = copied(host.key_padding_mask, arena, backend);
  b.loss_mask = copied(host.loss_mask, arena, backend);
  return b;
}

}  // namespace

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
