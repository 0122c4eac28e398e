// CpuRecurrentLayers: the CPU backend's recurrent layers, and everything CPU-specific about
// them that nn/rnn.h's RnnStack used to hold: the choice between seqtrain's fused kernels
// (backend/cpu/rnn_fused.h) and oneDNN's RNN primitive (rnn_primitive.h), the autotuner that
// picks per layer shape, the packed per-step GEMMs, the 16-bit weight copies of bf16/fp16 and
// the private arena of gradient checkpointing. RnnStack keeps the parameters and dropout and
// calls this one layer at a time through the Backend seam; docs/ARCHITECTURE.md, "The RNN
// layers", has the details of the kernels.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/autotune.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/recurrent_gemm.h"
#include "backend/cpu/rnn_fused.h"
#include "backend/cpu/rnn_primitive.h"

namespace seqtrain {

// Which kernels a layer runs: seqtrain's fused kernels on PyTorch's layout (the default) or
// oneDNN's RNN primitives (RnnOptions::impl's words).
enum class RnnImpl { fused, onednn };
RnnImpl parse_rnn_impl(const std::string& name);
const char* rnn_impl_name(RnnImpl impl);

class CpuRecurrentLayers : public RecurrentLayers {
 public:
  explicit CpuRecurrentLayers(const RecurrentSpec& spec);

  SEQTRAIN_RECURRENT_LAYERS_PASSES
  size_t scratch_bytes() const override { return ckpt_arena_.high_water(); }
  std::string layer_impl(size_t k) const override { return rnn_impl_name(layers_.at(k).impl); }
  // The ISA level of layer k's fused gate passes (after autotuning, the chosen one).
  Isa layer_isa(size_t k) const;

 private:
  struct Layer {
    int64_t in = 0;
    std::vector<float> w_layer, w_iter, bias;       // oneDNN layout (ldigo), packed each forward
    std::vector<float> w_layer_t, w_iter_t;         // ldgoi copies for backward
    std::vector<float> dw_layer, dw_iter, dbias;    // oneDNN layout gradients
    std::unique_ptr<RnnPrimitive> prim;
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
  void convert_weights_half(Layer& l, const RecurrentWeights& w);
  // Whether the fused forward runs its per-step GEMM through a packed RecurrentGemm: for the
  // bf16 LSTM, and in fp32 as below; not for fp16 (emulated GEMM) nor for the bf16 GRU, whose
  // packed bf16 matmul at W1GRU's shape measured slower than the plain bf16 GEMM (the bf16
  // LSTM is the other way round; docs/BENCHMARKS.md, "Measurements behind code choices").
  // In fp32 `packed_f32_`: where oneDNN's matmul is its brgemm (AVX-512 and up), and for the GRU
  // below it too. Below AVX-512 the matmul is oneDNN's jit sgemm behind a primitive, and for the
  // LSTM the plain sgemm measured faster (AVX2, W2's layer forward 196 vs 300 ms, W2 step 12-17%,
  // W1 7%), for the GRU 3% slower (docs/BENCHMARKS.md, issue 13).
  bool packed_forward() const {
    return half_ ? half_type_ == HalfType::bf16 && cell_ == RnnCell::lstm : packed_f32_;
  }
  // The fused backward's recurrent product through a packed RecurrentGemm: bf16 always, fp16
  // never (no packed path), fp32 as the forward (AVX2, W2's layer backward 367 vs 414 ms).
  bool packed_backward() const { return half_ ? half_type_ == HalfType::bf16 : packed_f32_; }
  void layer_forward(Layer& l, const RecurrentWeights& w, const Tensor& in, Arena& arena, bool training,
                     std::span<const int64_t> lengths);
  Tensor layer_backward(Layer& l, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx);
  void autotune_layer(Layer& l, const RecurrentWeights& w, const Tensor& in, bool has_lengths);
  RnnPrimitive& primitive(Layer& l, int64_t T, int64_t N, bool training);
  void pack(Layer& l, const RecurrentWeights& w);
  void pack_backward(Layer& l, const RecurrentWeights& w);
  void unpack_grads(Layer& l, const RecurrentWeights& w);
  struct GateBlocks {
    float* f32 = nullptr;
    uint16_t* half = nullptr;
    int64_t steps = 0;  // time steps in a block
  };
  GateBlocks gate_blocks(int64_t N, int64_t T, Arena& arena, bool ckpt) const;
  void forward_fused(Layer& l, const RecurrentWeights& w, const Tensor& in, Arena& keep, bool ckpt,
                     std::span<const int64_t> lengths);
  Tensor backward_fused(Layer& l, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx);
  void forward_onednn(Layer& l, const RecurrentWeights& w, const Tensor& in, Arena& arena, bool training);
  Tensor backward_onednn(Layer& l, const RecurrentWeights& w, const Tensor& dy, Arena& arena);

  RnnCell cell_;
  RnnImpl impl_;
  int64_t hidden_, dirs_;
  Precision precision_;
  bool half_ = false;  // 16-bit GEMM operands (bf16 or fp16), of type half_type_
  HalfType half_type_ = HalfType::bf16;
  bool packed_f32_ = false;  // the fp32 recurrent products packed (see packed_forward)
  bool ckpt_ = false, autotune_ = false;
  std::shared_ptr<Autotuner> tuner_;
  Arena ckpt_arena_;  // under gradient checkpointing: the recomputed gates block, backward workspace
  const Layer* ckpt_live_ = nullptr;  // the layer whose forward last wrote the gates block
  std::vector<Layer> layers_;
};

}  // namespace seqtrain
