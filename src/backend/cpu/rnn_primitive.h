// RnnPrimitive: one oneDNN LSTM or linear-before-reset GRU layer (one or both directions),
// forward_training and backward primitives created once for a (T, N, C, H) shape and reused.
// It speaks oneDNN's layouts: weights ldigo [1, D, C, G, H] for forward but ldgoi
// ([D][G][H][C], PyTorch's own order) for backward, bias [1, D, Gb, H], layer
// data tnc. Converting PyTorch's parameter layout and
// gate order to these is nn/rnn's job.
#pragma once
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/cpu/rnn_cell.h"

namespace seqtrain {

// oneDNN's bias has an extra gate for the GRU: the recurrent bias of the new gate.
inline int64_t rnn_bias_gates(RnnCell c) { return 4; }

struct RnnShape {
  RnnCell cell = RnnCell::lstm;
  int64_t T = 1, N = 1, C = 1, H = 1, D = 1;
  bool training = true;
  bool operator==(const RnnShape&) const = default;
};

// Where element (direction d, input i, gate g, output o) of a weight gradient lives:
// d*sd + i*si + g*sg + o. oneDNN pads the input stride of its gradient buffers, so they are
// not plain ldigo (and handing it plain ldigo gives wrong unidirectional gradients in 2.6).
struct WeightLayout {
  int64_t sd = 0, si = 0, sg = 0;
  size_t bytes = 0;
};

class RnnPrimitive {
 public:
  explicit RnnPrimitive(const RnnShape& shape);
  const RnnShape& shape() const { return shape_; }
  size_t workspace_bytes() const;
  const WeightLayout& dw_layer_layout() const { return dwl_layout_; }
  const WeightLayout& dw_iter_layout() const { return dwi_layout_; }

  // dst: [T, N, H*D]. workspace: workspace_bytes() bytes, kept until backward (training only).
  void forward(const float* src, const float* w_layer, const float* w_iter, const float* bias,
               float* dst, void* workspace);
  // Writes diff_src ([T, N, C] in the input's layout) and the weight gradients in the
  // dw_*_layout()s (overwritten, not accumulated). w_layer and w_iter are in ldgoi here.
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                const float* w_layer, const float* w_iter, const float* bias, float* dw_layer,
                float* dw_iter, float* dbias, void* workspace);

 private:
  RnnShape shape_;
  dnnl::memory::desc src_md_, dst_md_, wl_md_, wi_md_, b_md_, wl_bwd_md_, wi_bwd_md_, dwl_md_, dwi_md_;
  WeightLayout dwl_layout_, dwi_layout_;
  dnnl::memory::desc iter_md_;
  std::vector<float> zeros_, diff_iter_;  // the zero initial state and its (unused) gradient
  dnnl::primitive fwd_;
  std::optional<dnnl::primitive> bwd_;
  dnnl::memory::desc ws_md_;
  // Memory objects and argument maps are built once; each call only swaps data handles,
  // so the steady-state step creates no oneDNN objects.
  dnnl::memory src_, dst_, wl_, wi_, b_, ws_, wl_bwd_, wi_bwd_, ddst_, dsrc_, dwl_, dwi_, db_;
  std::unordered_map<int, dnnl::memory> fwd_args_, bwd_args_;
};

}  // namespace seqtrain
