#include "backend/device_batch.h"

#include <cstring>

namespace seqtrain {

Tensor device_tensor(const Tensor& host, Arena& arena, Backend& backend) {
  if (backend.host_accessible() || host.ptr == nullptr || host.numel() == 0) return host;
  ST_CHECK(host.contiguous(), "a batch tensor {} must be contiguous to be copied to the {} backend",
           shape_str(host.shape), backend.name());
  Tensor dev = arena.tensor(host.shape, host.dtype);
  dev.device = host.device;
  backend.upload(host.ptr, dev.ptr, host.nbytes());  // queued: the step does not wait for it
  return dev;
}

void read_floats(Backend& backend, const Tensor& t, float* host) {
  ST_CHECK(t.contiguous() && t.dtype == DType::f32, "read_floats needs a contiguous f32 tensor, got {} {}",
           dtype_name(t.dtype), shape_str(t.shape));
  if (t.numel() == 0) return;
  if (backend.host_accessible()) std::memcpy(host, t.ptr, t.nbytes());
  else backend.copy_to_host(t.ptr, host, t.nbytes());
}

Batch device_batch(const Batch& host, Arena& arena, Backend& backend) {
  if (backend.host_accessible()) return host;
  Batch b = host;
  b.inputs = device_tensor(host.inputs, arena, backend);
  b.targets = device_tensor(host.targets, arena, backend);
  b.lengths = device_tensor(host.lengths, arena, backend);
  b.key_padding_mask = device_tensor(host.key_padding_mask, arena, backend);
  b.loss_mask = device_tensor(host.loss_mask, arena, backend);
  return b;
}

}  // namespace seqtrain
