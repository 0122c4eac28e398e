// device_batch: where a Batch crosses from the host loader to the model's backend. The loader
// fills host memory; on a backend whose memory the host cannot reach (a GPU) every tensor the
// model and objective read (inputs, targets, lengths, masks) is copied into the step's arena,
// one copy_from_host each, and the returned Batch points there. On a host-accessible backend
// (cpu, reference) it is the batch itself: no copy, so the CPU path is zero-copy and bitwise
// what it was.
#pragma once
#include "backend/backend.h"
#include "core/arena.h"
#include "core/batch.h"

namespace seqtrain {

Batch device_batch(const Batch& host, Arena& arena, Backend& backend);
// device_batch's copies on any backend, a host-accessible one too: a captured step
// (train/step_graphs.h) reads its batch at the arena addresses of its capture, never the
// loader's slot of the moment.
Batch staged_batch(const Batch& host, Arena& arena, Backend& backend);
// Model outputs to the host for what only the host does with them (denormalizing and writing
// predictions, sampling a token): `host` receives t's contiguous f32 elements.
void read_floats(Backend& backend, const Tensor& t, float* host);
// Whether a batch tensor has bytes to copy (an empty one stays empty); an Error when it is not
// contiguous, which one copy cannot move.
bool needs_copy(const Tensor& host, const Backend& backend);
// One host tensor into the arena (the same when the backend is host-accessible); an empty tensor
// stays empty.
Tensor device_tensor(const Tensor& host, Arena& arena, Backend& backend);

}  // namespace seqtrain
