// ParamStore: every trainable parameter of a model in one contiguous f32 buffer, and every
// gradient in a second buffer of the same layout. Layers register named tensors (named and
// shaped exactly like the equivalent PyTorch state_dict entry) before finalize(); afterwards
// the optimizer, clipping, all-reduce and checkpointing each make one pass over one buffer.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

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
};

class ParamStore {
 public:
  // Returns the entry index; the tensor's memory exists only after finalize().
  size_t add(std::string name, Shape shape);
  void finalize();
  bool finalized() const { return finalized_; }

  Tensor param(size_t i) { return Tensor(params_.data() + entries_.at(i).offset, entries_[i].shape); }
  Tensor grad(size_t i) { return Tensor(grads_.data() + entries_.at(i).offset, entries_[i].shape); }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry* find(const std::string& name) const;
  // A second state_dict name for entry i's tensor: a tied weight (nanoGPT's lm_head.weight is
  // transformer.wte.weight). The optimizer, clipping and gradients see the tensor once; the
  // model file holds it under both names with the same bytes, so it loads into the PyTorch
  // module with strict=True, and loading accepts the alias only when its bytes equal the entry's.
  void add_alias(std::string name, size_t i);
  const std::vector<std::pair<std::string, size_t>>& aliases() const { return aliases_; }
  // A finalized store with this one's entries, flags and aliases and zeroed buffers of its own
  // (checkpoint snapshots and scratch loads).
  ParamStore clone_layout() const;
  void set_decay(size_t i, bool decay) { entries_.at(i).decay = decay; }
  void mark_embedding(size_t i) { entries_.at(i).embedding = true; }
  // One byte per parameter element (after finalize()): 1 where its entry decays, for
  // Optimizer::set_decay_mask.
  std::vector<uint8_t> decay_mask() const;

  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* params() const { return params_.data(); }
  const float* grads() const { return grads_.data(); }
  size_t size() const { return params_.size(); }
  void zero_grad();

  // The device the parameters live on and every layer over them computes with (the model sets
  // it from runtime.backend before its layers are built; unset: the CPU backend). Layers, the
  // optimizer and clipping take it from here rather than from a process-wide choice.
  Backend& backend() const;
  void set_backend(Backend& b) { backend_ = &b; }

 private:
  std::vector<ParamEntry> entries_;
  std::vector<std::pair<std::string, size_t>> aliases_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<float> params_, grads_;
  bool finalized_ = false;
  Backend* backend_ = nullptr;
};

}  // namespace seqtrain
