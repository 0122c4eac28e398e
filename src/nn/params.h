// ParamStore: every trainable parameter of a model in one contiguous f32 buffer (and its buffers,
// ParamEntry::buffer: state that is not trained), and every gradient in a second buffer of the
// same layout. Layers register named tensors (named and shaped exactly like the equivalent
// PyTorch state_dict entry) before finalize(); afterwards
// the optimizer, clipping, all-reduce and checkpointing each make one pass over one buffer.
//
// Memory and the host-access contract. finalize() allocates both buffers from the store's
// backend (backend/device_buffer.h), so set_backend() comes before finalize(). params(),
// grads(), param(i) and grad(i) are *device* pointers: what the backend's operations take.
// Host code (layer init, checkpoint and safetensors I/O, init_from, generation loops) reads and
// writes the values only through:
//   - read_params / write_params: copies of a range, sizes checked (Error on a mismatch);
//   - read_view(): a HostReadView, the buffer itself when host_accessible() and a copy otherwise;
//   - HostParams: stages the parameters on the host for code that writes through param(i)
//     (Model::init wraps every model's initialisation in one), uploaded once by commit().
// On a host-accessible backend (cpu, reference) every one of these is direct or one memcpy, and
// code that already knows its store is host-accessible (tests, the CPU-only benches) may keep
// using params()/param(i) on the host. The training step never copies: the optimizer, clipping
// and the loss scaler work on the device pointers through the backend; every registered family
// trains on memory the host may not touch (tests/test_device_memory.cpp's GuardedBackend).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/device_buffer.h"
#include "backend/host_view.h"
#include "core/tensor.h"

namespace seqtrain {

class Backend;

struct ParamEntry {
  std::string name;  // PyTorch state_dict key, e.g. "rnn.weight_ih_l0"
  Shape shape;
  size_t offset = 0; // in elements, into params() and grads()
  // Whether weight decay applies. Every entry decays by default, biases too, like
  // torch.optim.AdamW(model.parameters()); models/model.h's decay policy sets it per entry.
  bool decay = true;
  bool embedding = false;  // an embedding table (the `matrices` decay policy leaves it undecayed)
  // Frozen (a parameter group's, optim/param_groups.h): the optimizer leaves it alone and its
  // gradient stays zero, so a model may skip the backward work that only feeds it.
  bool frozen = false;
  // A buffer, not a parameter (torch's register_buffer: BatchNorm's running statistics): a layer
  // writes it in forward, and it is frozen and undecayed for good, whatever the groups say, so no
  // optimizer, unfreezing or weight decay ever touches it. It lives in the flat buffer anyway so
  // that checkpoints, resume, export, init_from / encoder_from and broadcasts carry it with no
  // case of their own; parameter counts leave it out.
  bool buffer = false;
};

class ParamStore {
 public:
  // Returns the entry index; the tensor's memory exists only after finalize().
  size_t add(std::string name, Shape shape);
  // The same for a buffer (ParamEntry::buffer): frozen and undecayed from the start.
  size_t add_buffer(std::string name, Shape shape);
  // Where the buffers lie in the flat buffer, as (offset, count) in entry order: what EMA copies
  // rather than averages, what a replayed accumulation restores, what parameter counts leave out.
  std::vector<std::pair<size_t, size_t>> buffer_ranges() const;
  bool has_buffers() const { return !buffer_ranges().empty(); }
  // Allocates the zeroed parameter and gradient buffers from backend().
  void finalize();
  bool finalized() const { return finalized_; }

  // Device views of entry i (host memory inside a HostParams scope or on a host-accessible backend).
  Tensor param(size_t i) { return Tensor(params() + entries_.at(i).offset, entries_[i].shape); }
  Tensor grad(size_t i) { return Tensor(grads() + entries_.at(i).offset, entries_[i].shape); }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry* find(const std::string& name) const;
  // A second state_dict name for entry i's tensor: a tied weight (nanoGPT's lm_head.weight is
  // transformer.wte.weight). The optimizer, clipping and gradients see the tensor once; the
  // model file holds it under both names with the same bytes, so it loads into the PyTorch
  // module with strict=True, and loading accepts the alias only when its bytes equal the entry's.
  void add_alias(std::string name, size_t i);
  const std::vector<std::pair<std::string, size_t>>& aliases() const { return aliases_; }
  // A finalized store with this one's entries, flags and aliases and zeroed buffers of its own,
  // on this store's backend or on `on` (checkpoint snapshots are host copies on the CPU backend).
  ParamStore clone_layout() const { return clone_layout(backend()); }
  ParamStore clone_layout(Backend& on) const;
  // A buffer stays undecayed and frozen whatever these are asked.
  void set_decay(size_t i, bool decay) { entries_.at(i).decay = decay && !entries_[i].buffer; }
  void mark_embedding(size_t i) { entries_.at(i).embedding = true; }
  void set_frozen(size_t i, bool frozen) { entries_.at(i).frozen = frozen || entries_.at(i).buffer; }
  // Whether no entry whose name starts with `prefix` is trainable (true when none matches): a
  // model skips a module's backward when nothing below it needs a gradient.
  bool all_frozen(std::string_view prefix) const;
  // Zeroes the gradients of the frozen entries (through the backend's fill): whatever a
  // backward added to them, a frozen tensor has no gradient, for clipping's norm as for torch.
  void zero_frozen_grads();
  // One byte per parameter element (after finalize()): 1 where its entry decays, for
  // Optimizer::set_decay_mask.
  std::vector<uint8_t> decay_mask() const;

  // The flat buffers (device pointers; see the contract above).
  float* params() { return staged_ ? staged_ : params_.data(); }
  float* grads() { return grads_.data(); }
  const float* params() const { return staged_ ? staged_ : params_.data(); }
  const float* grads() const { return grads_.data(); }
  size_t size() const { return size_; }
  void zero_grad();  // through the backend's fill

  // ---- Host access (the contract above) ----
  bool host_accessible() const;
  // Parameters [offset, offset + dst.size()) to host memory, and host memory into them; a range
  // past size() is an Error naming both sizes.
  void read_params(std::span<float> dst, size_t offset = 0) const;
  void write_params(std::span<const float> src, size_t offset = 0);
  // Every parameter readable on the host: the buffer itself on a host-accessible backend.
  HostReadView read_view() const;
  class HostParams;

  // The device the parameters live on and every layer over them computes with (the model sets
  // it from runtime.backend before its layers are built; unset: the CPU backend). Layers, the
  // optimizer and clipping take it from here rather than from a process-wide choice.
  Backend& backend() const;
  // Before finalize() only (the buffers are that backend's memory): an Error afterwards.
  void set_backend(Backend& b);

 private:
  void check_not_staged(const char* what) const;

  std::vector<ParamEntry> entries_;
  std::vector<std::pair<std::string, size_t>> aliases_;
  std::unordered_map<std::string, size_t> index_;
  DeviceBuffer params_, grads_;
  size_t size_ = 0;
  float* staged_ = nullptr;  // the host copy params() points at inside a HostParams scope
  bool finalized_ = false;
  Backend* backend_ = nullptr;
};

// Host read-write access to every parameter through the store's own params()/param(i), for
// code that writes parameters in place on the host (Model::init around every model's layer
// init()). On a host-accessible backend it does nothing: params() already is host memory.
// Otherwise it downloads the parameters into a host copy that params() points at until
// commit() uploads it, once; leaving the scope without commit() (an exception) drops the copy
// and the device keeps its values. Gradients are not staged; scopes do not nest.
class ParamStore::HostParams {
 public:
  explicit HostParams(ParamStore& store);
  ~HostParams();
  HostParams(const HostParams&) = delete;
  HostParams& operator=(const HostParams&) = delete;
  void commit();

 private:
  ParamStore& store_;
  std::vector<float> copy_;
};

}  // namespace seqtrain
