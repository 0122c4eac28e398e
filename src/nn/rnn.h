// RnnStack: a multi-layer, optionally bidirectional LSTM or GRU with PyTorch's semantics
// (GRU "linear before reset"), parameters named and shaped like nn.LSTM / nn.GRU's state_dict
// (<prefix>.weight_ih_l{k}[_reverse], weight_hh, bias_ih, bias_hh; gates i,f,g,o / r,z,n),
// and dropout between layers in training, as nn.LSTM(dropout=p) does.
//
// Each layer runs one of two implementations (runtime.rnn_impl, or per layer shape by the
// autotuner): seqtrain's fused kernels (backend/cpu/rnn_fused.h, the default) straight on the
// PyTorch-layout parameters, or oneDNN's RNN primitive (both directions at once), for which
// forward() packs the parameters into oneDNN's ldigo layout and gate order and backward()
// unpacks the gradients back. docs/ARCHITECTURE.md, "The RNN layers", has the details.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/autotune.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/rnn_fused.h"
#include "backend/cpu/rnn_primitive.h"
#include "core/rng.h"
#include "nn/dropout.h"
#include "nn/params.h"

namespace seqtrain {

// Which kernels run the layers: seqtrain's fused kernels on PyTorch's layout (the default,
// faster on CPU) or oneDNN's RNN primitives. Both are tested against PyTorch.
enum class RnnImpl { fused, onednn };
RnnImpl parse_rnn_impl(const std::string& name);
const char* rnn_impl_name(RnnImpl impl);

// The compute precision of the layers' matrix products. fp32 master weights, gradients, gate
// math and state in every case; bf16 and fp16 round the GEMM operands to 16 bits and
// accumulate in fp32 (fp16 is emulated on CPUs without native fp16: backend/cpu/gemm_fp16.h).
enum class RnnPrecision { fp32, bf16, fp16 };
const char* rnn_precision_name(RnnPrecision p);

// Resolves runtime.precision ("fp32" | "bf16" | "fp16" | "auto"). "auto" is bf16 exactly when the
// CPU has native bf16 dot products, fp32 otherwise (never fp16: it needs loss scaling and is not
// faster here); *why (when given) says which and why, for the log. Unknown names, and bf16 on a
// CPU without AVX512-BF16, are a seqtrain::Error naming the accepted values.
RnnPrecision rnn_precision(const std::string& precision, std::string* why = nullptr);

struct RnnOptions {
  RnnImpl impl = RnnImpl::fused;
  // bf16 / fp16 GEMMs with fp32 accumulation, fp32 master weights, gate math and state (fused only).
  RnnPrecision precision = RnnPrecision::fp32;
  // Keep only each layer's input in forward; recompute the layer inside backward (fused only;
  // layers on oneDNN primitives keep their workspace as before). The saved state of one layer
  // at a time lives in a private arena, so the top layer, computed last, needs no recompute.
  bool grad_checkpoint = false;
  // At the first training forward of each layer shape, time the candidates and keep the fastest,
  // per layer: the fused kernels at the active ISA level and at AVX2 when the active level is
  // higher (the wider vectors do not win on every CPU), and oneDNN's primitive (fp32 only; bf16
  // has only the fused kernels).
  bool autotune = false;
  std::shared_ptr<Autotuner> autotuner;  // decisions shared with the caller; made when null
};

class RnnStack {
 public:
  RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
           int64_t hidden, int64_t layers, bool bidirectional, float dropout, RnnImpl impl = RnnImpl::fused);
  RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
           int64_t hidden, int64_t layers, bool bidirectional, float dropout, const RnnOptions& options);

  void init(Rng& rng);  // uniform(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter

  // x: [N, T, C] (batch first). Returns the top layer's output, [T, N, H*D] (time major),
  // so the last time step is the contiguous block out[T-1].
  Tensor forward(const Tensor& x, Arena& arena, bool training, uint64_t seed);
  // dy: [T, N, H*D]. Accumulates parameter gradients. Returns dx [N, T, C] when want_dx.
  Tensor backward(const Tensor& dy, Arena& arena, bool want_dx);

  int64_t output_size() const { return hidden_ * dirs_; }

  // Gradient checkpointing keeps the recomputed per-layer state in a private arena (one layer
  // at a time) instead of the caller's: its high-water mark in bytes. Activation memory of a
  // step = caller's Arena::high_water() + this (0 without checkpointing).
  size_t checkpoint_scratch_bytes() const { return ckpt_arena_.high_water(); }
  RnnPrecision precision() const { return precision_; }
  bool grad_checkpoint() const { return ckpt_; }
  // Which implementation layer k runs now (after autotuning, the chosen one).
  RnnImpl layer_impl(size_t k) const { return layers_.at(k).impl; }
  // The ISA level of layer k's fused gate passes (after autotuning, the chosen one).
  Isa layer_isa(size_t k) const;
  Autotuner* autotuner() { return tuner_.get(); }

 private:
  struct Layer {
    int64_t in = 0;
    std::vector<size_t> w_ih, w_hh, b_ih, b_hh;    // ParamStore indices, one per direction
    std::vector<float> w_layer, w_iter, bias;       // oneDNN layout (ldigo), packed each forward
    std::vector<float> w_layer_t, w_iter_t;         // ldgoi copies for backward
    std::vector<float> dw_layer, dw_iter, dbias;    // oneDNN layout gradients
    std::unique_ptr<RnnPrimitive> prim;
    Dropout drop;                                   // applied to this layer's output
    Tensor src, dst;                                // saved for backward
    void* workspace = nullptr;                      // oneDNN's, or
    std::vector<FusedRnnArgs> fused;                // the fused kernels' saved state, per direction
    // Per direction: the fused kernels' per-step GEMMs with W_hh packed once per pass. Their
    // primitives and packed weights are made at the first step of each shape and then reused.
    std::vector<RecurrentGemm> rec_fwd, rec_bwd;
    RnnImpl impl = RnnImpl::fused;
    const CpuKernels* kernels = nullptr;            // the fused gate passes' level; null: the active one
    std::vector<uint16_t> w_ih_bf, w_hh_bf;         // 16-bit copies, all directions, made each forward
                                                    // (w_hh_bf only for fp16, which has no packed path)
    int64_t tuned_T = -1, tuned_N = -1;             // shape of the last autotune decision
  };
  void init_layers(const std::string& prefix, int64_t input_size, int64_t layers, float dropout);
  void convert_weights_half(Layer& l);
  // Whether the fused forward runs its per-step GEMM through a packed RecurrentGemm: always in
  // fp32 and for the bf16 LSTM; not for fp16 (emulated GEMM) nor for the bf16 GRU, whose
  // packed bf16 matmul at W1GRU's shape measured slower than the plain bf16 GEMM (the bf16
  // LSTM is the other way round; docs/BENCHMARKS.md, "Measurements behind code choices").
  bool packed_forward() const { return !half_ || (half_type_ == HalfType::bf16 && cell_ == RnnCell::lstm); }
  void layer_forward(Layer& l, const Tensor& in, Arena& arena, bool training);
  Tensor layer_backward(Layer& l, const Tensor& dy, Arena& arena, bool want_dx);
  void autotune_layer(Layer& l, const Tensor& in);
  RnnPrimitive& primitive(Layer& l, int64_t T, int64_t N, bool training);
  void pack(Layer& l);
  void pack_backward(Layer& l);
  void unpack_grads(Layer& l);
  struct GateBlocks {
    float* f32 = nullptr;
    uint16_t* half = nullptr;
    int64_t steps = 0;  // time steps in a block
  };
  GateBlocks gate_blocks(int64_t N, int64_t T, Arena& arena, bool ckpt) const;
  void forward_fused(Layer& l, const Tensor& in, Arena& keep, bool ckpt = false);
  Tensor backward_fused(Layer& l, const Tensor& dy, Arena& arena, bool want_dx);
  void forward_onednn(Layer& l, const Tensor& in, Arena& arena, bool training);
  Tensor backward_onednn(Layer& l, const Tensor& dy, Arena& arena);

  ParamStore& params_;
  RnnCell cell_;
  RnnImpl impl_;
  int64_t hidden_, dirs_;
  RnnPrecision precision_;
  bool half_ = false;  // 16-bit GEMM operands (bf16 or fp16), of type half_type_
  HalfType half_type_ = HalfType::bf16;
  bool ckpt_ = false, autotune_ = false;
  std::shared_ptr<Autotuner> tuner_;
  Arena ckpt_arena_;  // under gradient checkpointing: the recomputed gates block, backward workspace
  const Layer* ckpt_live_ = nullptr;  // the layer whose forward last wrote the gates block
  std::vector<Layer> layers_;
};

}  // namespace seqtrain
