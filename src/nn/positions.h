// Positions: what a transformer adds to its token vectors so that attention, which on its own sees
// a set, can tell the steps apart. One of:
//   learned     a table "<name>.weight" [max_len, C] trained with the model (nanoGPT's wpe, an
//               nn.Embedding): row t added to every sequence's step t
//   sinusoidal  the fixed table of "Attention Is All You Need", no parameters:
//               pe[t, 2i] = sin(t w_i), pe[t, 2i+1] = cos(t w_i), w_i = 10000^(-2i / C)
//               (computed in double, stored as float; the python mirror builds the same table)
//   none        nothing: the encoder over sets, whose output must not depend on element order
// Both tables are added with one lookup of a [B, T] position-id buffer made once per batch shape
// (one launch each way, and no per-step upload), the same op the token embedding uses.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "backend/device_buffer.h"
#include "core/arena.h"
#include "nn/embedding.h"
#include "nn/params.h"

namespace seqtrain {

enum class PositionKind { learned, sinusoidal, none };
// "learned" | "sinusoidal" | "none" (model.positions' words, "auto" resolved by the model).
PositionKind position_kind(const std::string& word);

class Positions {
 public:
  Positions(ParamStore& params, const std::string& name, PositionKind kind, int64_t max_len, int64_t dim);
  // x [B, T <= max_len, C] += table[t] on every sequence's row t.
  void add(const Tensor& x, Arena& arena);
  // The learned table's gradient: every sequence's row t of dx into table row t; nothing otherwise.
  void backward(const Tensor& dx, Arena& arena);

  PositionKind kind() const { return kind_; }
  // The learned table's ParamStore entry (an Error for the other kinds).
  size_t weight() const;

 private:
  ParamStore& params_;
  PositionKind kind_;
  int64_t max_len_, dim_;
  std::optional<Embedding> learned_;
  DeviceBuffer fixed_;  // sinusoidal: the table [max_len, C]
  // The position ids of a [ids_B_, ids_T_] batch as int64 in the backend's memory; a batch of
  // fewer rows reads their first B * T (an epoch's short last batch makes none of its own, so a
  // captured step of the full batches stays valid: train/step_graphs.h).
  DeviceBuffer ids_;
  int64_t ids_B_ = 0, ids_T_ = 0;
};

}  // namespace seqtrain
