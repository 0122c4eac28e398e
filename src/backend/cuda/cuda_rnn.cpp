// The CUDA backend's recurrent layers (CudaBackend::make_recurrent): one cuDNN RNN per layer
// (the caller, nn/rnn.h's RnnStack, loops over layers), or for a stack with no dropout between
// its layers (forward_stack) either that or one cuDNN RNN of every layer (cuDNN may then
// overlap the layers' time steps), LSTM or GRU, one or two directions, on
// the PyTorch-layout fp32 weights of backend.h's RecurrentWeights. fp32: fp32 data and strict
// fp32 math. bf16 / fp16 (runtime.precision; torch.autocast's LSTM on cuDNN): cuDNN's data,
// weights and hidden states in 16 bits, tensor-core math with fp32 accumulation; the layer's
// fp32 x, y, dy and dx are rounded / widened at its edges (one convert each), the fp32 weights
// rounded into the weight space and the 16-bit weight gradients widened and added into the fp32
// ones. With runtime.autotune (the default) the first training step times, per shape, cuDNN's
// CUDNN_RNN_ALGO_STANDARD against PERSIST_STATIC (persistent kernels: fast for small hidden
// sizes in fp16, slow in fp32) and, for a stack, a call per layer against one call of the
// whole stack, as cudnn.benchmark; without it, standard and a call per layer.
// SEQTRAIN_CUDNN_RNN_ALGO=standard|persist_static and SEQTRAIN_CUDNN_RNN_STACK=whole|layers
// force either (measured in docs/BENCHMARKS.md).
//
// Why cuDNN's formulas are PyTorch's (the reference backend's, reference_rnn.h):
//   LSTM: the standard cell with two biases (CUDNN_RNN_DOUBLE_BIAS: b_ih in the input GEMM, b_hh
//         in the recurrent one), as nn.LSTM.
//   GRU:  cuDNN computes h' = tanh(W_h x + b_Wh + r * (R_h h + b_Rh)) and h = (1 - z) h' + z h_prev
//         (cudnn_adv.h's CUDNN_GRU comment and the cuDNN API reference): the recurrent bias sits
//         inside r *, i.e. PyTorch's "linear before reset" n = tanh(W_in x + b_in + r (W_hn h + b_hn)).
//
// Weight layout. cuDNN keeps all of a layer's matrices and biases in one opaque "weight space";
// cudnnGetRNNWeightParams says where each (pseudo-layer, linLayerID) matrix and bias lives.
// The pseudo-layer of layer k, direction d is k * dirs + d (0 forward, 1 reverse). The linLayerID
// order (cuDNN API reference, cudnnGetRNNWeightParams; cudnn_adv.h lists none):
//   LSTM: 0-3 input-side W (input gate, forget gate, new memory c', output gate), 4-7 the
//         recurrent-side R of the same gates      = PyTorch's i, f, g, o rows of W_ih / W_hh
//   GRU:  0-2 input-side W (reset r, update z, new memory h'), 3-5 recurrent-side R
//                                                 = PyTorch's r, z, n rows of W_ih / W_hh
// so PyTorch gate g of W_ih (rows [g*H, (g+1)*H), row-major [H, C]) is linLayerID g, of W_hh
// linLayerID G + g, and each cuDNN matrix is that same row-major [H, C] block: every gate
// matrix and bias is one contiguous run on both sides. b_ih's gate g is the bias of id g, b_hh's
// the bias of id G + g. Sizes are checked against the descriptors cuDNN returns; the order is
// what the GPU test (tests/test_cuda_rnn.cpp) holds to the reference.
//
// Per step: forward copies the PyTorch weights into the layer's weight space (they change every
// optimizer step) with one kernel launch per layer (cuda_rnn.cu), then cudnnRNNForward (training mode keeps the reserve
// space backward needs). Backward runs cudnnRNNBackwardData_v8 (dx; it also leaves the gate
// gradients in the reserve space) and then cudnnRNNBackwardWeights_v8 with CUDNN_WGRAD_MODE_ADD
// into a packed gradient space zeroed just before, and one kernel launch ADDS that space into
// the PyTorch-layout dw/db (the contract adds gradients; cuDNN's packed layout is not PyTorch's,
// so it cannot accumulate into them directly).
//
// Memory. Everything cuDNN needs between forward and backward (weight space, reserve space) and
// the per-call temporaries (workspace, gradient space, a dx sink for want_dx = false) are device
// buffers owned here, from the backend's allocate(), sized at the first call of a layer shape
// and reused: a steady-state step allocates nothing. The initial states hx/cx are null
// pointers, which cuDNN reads as zeros (PyTorch's zero initial state); hy/cy, dhx/dcx are not
// asked for.
//
// Lengths (RecurrentLayers::forward's per-sample lengths): cuDNN runs variable-length batches
// itself, given each sample's length in seqLengthArray (host, for the descriptors) and
// devSeqLengths (device, for the calls); PyTorch's packed sequences are this. The caller's
// padded time-major x and y are cuDNN's SEQ_MAJOR_UNPACKED layout, allowed by the descriptor's
// CUDNN_RNN_PADDED_IO_ENABLED; cuDNN writes the padding fill 0 into y's padded steps and
// neither reads x nor dy there. Without lengths the layout stays SEQ_MAJOR_PACKED with every
// length T, which is the same memory.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_rnn.h"
#include "backend/autotune.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

// Gathers one layer's blocks for launch_rnn_blocks.
class BlockTable {
 public:
  explicit BlockTable(RnnSpaceType space) : t_{} { t_.space = space; }
  void add(const void* src, void* dst, int64_t n) {
    ST_CHECK(t_.count < kRnnMaxBlocks, "cuda recurrent layer: more than {} weight blocks", kRnnMaxBlocks);
    t_.b[t_.count++] = RnnBlock{src, dst, n};
    t_.longest = std::max(t_.longest, n);
  }
  void launch(bool add, cudaStream_t stream) const { ST_CUDA(launch_rnn_blocks(t_, add, stream)); }

 private:
  RnnBlockTable t_;
};

// ---- Owned cuDNN descriptors and device buffers ----

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { ST_CUDNN(Create(&d_)); }
  ~Descriptor() { Destroy(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};
using RnnDesc = Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using DropoutDesc = Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;

// Device memory from the backend that only grows. Growing waits for the stream first: work
// queued earlier may still read the old buffer.
class DeviceMemory {
 public:
  explicit DeviceMemory(CudaBackend& be) : be_(be) {}
  ~DeviceMemory() {
    try {
      be_.release(p_);
    } catch (...) {  // a destructor must not throw: a failed release is left to the backend's teardown
    }
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* ensure(size_t bytes) {
    if (bytes <= bytes_) return p_;
    if (p_) ST_CUDA(cudaStreamSynchronize(be_.stream()));
    be_.release(p_);
    p_ = nullptr;
    bytes_ = 0;
    p_ = be_.allocate(bytes);
    bytes_ = bytes;
    return p_;
  }
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  CudaBackend& be_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

int64_t descriptor_elements(cudnnTensorDescriptor_t d) {
  cudnnDataType_t type;
  int nb = 0, dims[8] = {}, strides[8] = {};
  ST_CUDNN(cudnnGetTensorNdDescriptor(d, 8, &type, &nb, dims, strides));
  int64_t n = 1;
  for (int i = 0; i < nb; ++i) n *= dims[i];
  return n;
}

// True when the GPU can address p (device, managed or pinned host memory); plain host memory
// from malloc is not.
bool device_accessible(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older runtimes flag unregistered host memory as an error
    return false;
  }
  return a.type != cudaMemoryTypeUnregistered;
}

// Which of two values the switch `name` holds: 0 or 1, or -1 when it is unset or empty; any other
// value is an Error naming both.
int env_choice(const char* name, const char* v0, const char* v1) {
  const char* a = std::getenv(name);
  if (!a || !*a) return -1;
  if (std::string_view(a) == v0) return 0;
  ST_CHECK(std::string_view(a) == v1, "{} is '{}': accepted values are {} and {}", name, a, v0, v1);
  return 1;
}

// The algorithm SEQTRAIN_CUDNN_RNN_ALGO forces, or none (unset: autotuned where runtime.autotune
// is on, else standard).
std::optional<cudnnRNNAlgo_t> algo_from_env() {
  const int c = env_choice("SEQTRAIN_CUDNN_RNN_ALGO", "standard", "persist_static");
  if (c < 0) return std::nullopt;
  return c == 0 ? CUDNN_RNN_ALGO_STANDARD : CUDNN_RNN_ALGO_PERSIST_STATIC;
}

const char* algo_name(cudnnRNNAlgo_t a) { return a == CUDNN_RNN_ALGO_PERSIST_STATIC ? "persist_static" : "standard"; }

std::string gpu_model() {
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "gpu";
  return p.name;
}

int to_int(int64_t v, const char* what) {
  ST_CHECK(v > 0 && v <= INT_MAX, "cuda recurrent layer: {} = {} must be in [1, {}] for cuDNN", what, v, INT_MAX);
  return static_cast<int>(v);
}

// ---- The layers ----

// SEQTRAIN_CUDNN_RNN_STACK=whole|layers forces how a stack without dropout runs (unset: timed
// with runtime.autotune, a call per layer without it).
std::optional<bool> whole_from_env() {
  const int c = env_choice("SEQTRAIN_CUDNN_RNN_STACK", "layers", "whole");
  if (c < 0) return std::nullopt;
  return c == 1;
}

// SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked: full-length batches in cuDNN's SEQ_MAJOR_UNPACKED layout
// (PyTorch's for unpacked input) instead of SEQ_MAJOR_PACKED; the same memory either way.
bool unpacked_from_env() { return env_choice("SEQTRAIN_CUDNN_RNN_LAYOUT", "packed", "unpacked") == 1; }

// Two more switches, to find what makes cuDNN pick its faster STANDARD kernels for PyTorch
// (docs/BENCHMARKS.md): SEQTRAIN_CUDNN_RNN_PADDED_IO=0 describes the RNN without padded IO
// (full-length batches only), SEQTRAIN_CUDNN_RNN_HX=zeros passes zero initial states instead of
// null pointers. Both compute the same numbers.
bool env_is(const char* name, std::string_view value) {
  const char* a = std::getenv(name);
  return a && std::string_view(a) == value;
}

class CudaRecurrentLayers final : public RecurrentLayers {
 public:
  CudaRecurrentLayers(CudaBackend& be, const RecurrentSpec& spec);
  SEQTRAIN_RECURRENT_LAYERS_PASSES  // one implementation (cuDNN): layer_impl's default, "fused"
  bool runs_stack() const override { return stack_; }
  void forward_stack(std::span<const RecurrentWeights> w, const Tensor& x, const Tensor& y, Arena& arena,
                     bool training, std::span<const int64_t> lengths) override;
  Tensor backward_stack(std::span<const RecurrentWeights> w, const Tensor& dy, Arena& arena, bool want_dx) override;

 private:
  // One cuDNN RNN: layers [first, first + count) of the stack, with one algorithm.
  struct Unit {
    explicit Unit(CudaBackend& be) : weights(be), reserve(be), seq_lengths(be), x16(be), y16(be), h0(be) {}
    int64_t first = 0, count = 1;
    cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
    int64_t in = 0;       // the input width of its bottom layer
    std::string what;     // "recurrent layer k" or "recurrent stack", for messages
    DropoutDesc dropout;  // before rnn: the RNN descriptor refers to it, so it is destroyed last
    RnnDesc rnn;
    size_t weight_bytes = 0;
    DeviceMemory weights, reserve, seq_lengths;
    // bf16 / fp16: the last training forward's x and y in cuDNN's type (backward reads both).
    DeviceMemory x16, y16;
    DeviceMemory h0;  // SEQTRAIN_CUDNN_RNN_HX=zeros: zero hx then cx, [count * dirs, N, H] each
    // Where linLayerID `id` of pseudo-layer p (layer k * dirs + direction d) keeps its matrix and
    // bias, at [p * 2G + id], in elements from the start of the weight space (the gradient space
    // has the same layout).
    std::vector<size_t> matrix_at, bias_at;
    // The (T, N) and per-sample lengths (empty: all T) the descriptors and buffers below were made for.
    int64_t T = 0, N = 0;
    std::vector<int> lengths;
    RnnDataDesc xdesc, ydesc;
    TensorDesc hdesc;
    size_t reserve_bytes = 0;
    // The last forward's input and output (the caller's memory, alive until backward).
    Tensor x, y;
    bool trained = false;
    bool padded = false;  // the last forward had lengths
  };
  // How a stack without dropout runs: one cuDNN call of every layer (cuDNN may then overlap the
  // layers' time steps) or a call per layer, with one algorithm. cuDNN's whole-stack call is not
  // always the faster (measured in docs/BENCHMARKS.md), so with runtime.autotune both are timed.
  struct Plan {
    bool whole = false;
    cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  };
  static std::string plan_name(const Plan& p);

  int64_t layer_in(const Unit& u, int64_t k) const { return inputs_[u.first + k]; }
  // The unit of layers [first, first + count) with `algo`, made at first use and then kept.
  Unit& unit(int64_t first, int64_t count, cudnnRNNAlgo_t algo);
  // Keeps only the units `keep` says to (after tuning: the losers' memory goes back).
  template <class Keep>
  void keep_units(Keep&& keep);
  std::vector<cudnnRNNAlgo_t> algos() const;
  // cudnn.benchmark's equivalent: each candidate runs one step (forward, both backward calls,
  // the gradients not added) on the real batch, then waits for the stream, so the run's
  // Autotuner times the GPU's work and the host's launches (which bound these latency-bound
  // layers as much). A candidate cuDNN refuses (the persistent kernels for some shapes and
  // GPUs) fails its first run and is left out. The decision is logged and cached in
  // autotune.json, so a resumed run computes with the same units. Returns the chosen name.
  std::string choose(const std::string& key, const std::vector<std::pair<std::string, std::function<void()>>>& runs);
  std::string tune_key(const Tensor& x, int64_t count, const char* what) const;
  void describe(Unit& u);
  void find_slots(Unit& u);
  void set_shape(Unit& u, int64_t T, int64_t N, std::span<const int64_t> lengths);
  void check_weights(std::span<const RecurrentWeights> ws, bool grads) const;
  // Calls f(k, d, which, at, slot, n) for every gate block of layer k of the unit: `which` names
  // the PyTorch array of direction d (0 W_ih, 1 W_hh, 2 b_ih, 3 b_hh), `at` the block's element
  // offset in it, `slot` its offset in the weight space, n its length.
  template <class F>
  void each_block(const Unit& u, F&& f) const;
  void pack(Unit& u, std::span<const RecurrentWeights> ws);
  void add_grads(const Unit& u, std::span<const RecurrentWeights> ws, const void* grad_space);
  void run_forward(Unit& u, std::span<const RecurrentWeights> ws, const Tensor& x, const Tensor& y, bool training,
                   std::span<const int64_t> lengths);
  // add false: the gradients are computed but not added (tuning's trial steps).
  Tensor run_backward(Unit& u, std::span<const RecurrentWeights> ws, const Tensor& dy, Arena& arena, bool want_dx,
                      bool add = true);
  void stack_forward(const Plan& p, std::span<const RecurrentWeights> ws, const Tensor& x, const Tensor& y,
                     Arena& arena, bool training, std::span<const int64_t> lengths);
  Tensor stack_backward(const Plan& p, std::span<const RecurrentWeights> ws, const Tensor& dy, Arena& arena,
                        bool want_dx, bool add);
  // The initial hidden and cell states cuDNN gets: null (zeros) or u.h0's zeros.
  std::pair<const void*, const void*> initial_state(const Unit& u) const;
  bool half() const { return compute_ != DType::f32; }
  // n fp32 values into cuDNN's type at dst, or back.
  void narrow(const void* src, void* dst, int64_t n) { be_.convert(DType::f32, src, compute_, dst, n); }
  void widen(const void* src, void* dst, int64_t n) { be_.convert(compute_, src, DType::f32, dst, n); }
  void bind_stream() { ST_CUDNN(cudnnSetStream(be_.cudnn(), be_.stream())); }

  CudaBackend& be_;
  RnnCell cell_;
  int64_t hidden_, dirs_, gates_;
  std::vector<int64_t> inputs_;  // each layer's input width
  DType compute_;               // f32, bf16 or f16: cuDNN's data type
  cudnnDataType_t data_type_;   // the same, as cuDNN names it
  size_t elem_bytes_;
  RnnSpaceType space_;
  std::optional<cudnnRNNAlgo_t> forced_;  // SEQTRAIN_CUDNN_RNN_ALGO
  std::optional<bool> forced_whole_;      // SEQTRAIN_CUDNN_RNN_STACK
  bool unpacked_;                         // SEQTRAIN_CUDNN_RNN_LAYOUT
  bool padded_io_ = !env_is("SEQTRAIN_CUDNN_RNN_PADDED_IO", "0");
  bool zero_state_ = env_is("SEQTRAIN_CUDNN_RNN_HX", "zeros");
  std::shared_ptr<Autotuner> tuner_;      // null: no autotuning (runtime.autotune false)
  bool stack_;                            // the caller may run the stack through forward_stack
  std::vector<cudnnRNNAlgo_t> layer_algo_;
  std::vector<bool> layer_tuned_;
  Plan plan_;
  bool plan_tuned_ = false;
  std::vector<std::unique_ptr<Unit>> units_;
  // Shared by the units: used within one call only.
  DeviceMemory workspace_, grad_space_, dx_sink_, dy16_, dx16_;
};

CudaRecurrentLayers::CudaRecurrentLayers(CudaBackend& be, const RecurrentSpec& spec)
    : be_(be), cell_(spec.cell), hidden_(spec.hidden), dirs_(spec.dirs), gates_(rnn_gates(spec.cell)),
      inputs_(spec.inputs), compute_(spec.options.precision.compute),
      data_type_(compute_ == DType::bf16 ? CUDNN_DATA_BFLOAT16 : compute_ == DType::f16 ? CUDNN_DATA_HALF
                                                                                        : CUDNN_DATA_FLOAT),
      elem_bytes_(compute_ == DType::f32 ? 4 : 2),
      space_(compute_ == DType::bf16 ? RnnSpaceType::bf16 : compute_ == DType::f16 ? RnnSpaceType::f16
                                                                                  : RnnSpaceType::f32),
      forced_(algo_from_env()), forced_whole_(whole_from_env()), unpacked_(unpacked_from_env()), workspace_(be),
      grad_space_(be), dx_sink_(be), dy16_(be), dx16_(be) {
  ST_CHECK(dirs_ == 1 || dirs_ == 2, "cuda recurrent layer: dirs must be 1 or 2, got {}", dirs_);
  ST_CHECK(!inputs_.empty(), "cuda recurrent layers: the spec has no layer");
  to_int(hidden_, "hidden size");
  for (const int64_t in : inputs_) to_int(in, "input width");
  if (spec.options.autotune && !(forced_ && forced_whole_))
    tuner_ = spec.options.autotuner ? spec.options.autotuner : std::make_shared<Autotuner>();
  // cuDNN's stack feeds layer k + 1 with layer k's output, as RnnStack does; a spec of other
  // widths runs a layer at a time.
  stack_ = inputs_.size() > 1 &&
           std::all_of(inputs_.begin() + 1, inputs_.end(), [&](int64_t in) { return in == hidden_ * dirs_; });
  layer_algo_.assign(inputs_.size(), forced_.value_or(CUDNN_RNN_ALGO_STANDARD));
  layer_tuned_.assign(inputs_.size(), false);
  plan_ = Plan{forced_whole_.value_or(false), forced_.value_or(CUDNN_RNN_ALGO_STANDARD)};
  unit(0, 1, layer_algo_[0]);  // cuDNN checks the descriptor now, not at the first step
}

std::string CudaRecurrentLayers::plan_name(const Plan& p) {
  return fmt::format("{} {}", p.whole ? "whole" : "layers", algo_name(p.algo));
}

CudaRecurrentLayers::Unit& CudaRecurrentLayers::unit(int64_t first, int64_t count, cudnnRNNAlgo_t algo) {
  ST_CHECK(first >= 0 && count >= 1 && first + count <= static_cast<int64_t>(inputs_.size()),
           "cuda recurrent layers {}..{} do not exist ({} layers)", first, first + count - 1, inputs_.size());
  for (auto& u : units_)
    if (u->first == first && u->count == count && u->algo == algo) return *u;
  auto u = std::make_unique<Unit>(be_);
  u->first = first;
  u->count = count;
  u->algo = algo;
  u->in = inputs_[first];
  u->what = count == 1 ? fmt::format("recurrent layer {}", first) : std::string("recurrent stack");
  describe(*u);
  find_slots(*u);
  units_.push_back(std::move(u));
  return *units_.back();
}

template <class Keep>
void CudaRecurrentLayers::keep_units(Keep&& keep) {
  std::erase_if(units_, [&](const std::unique_ptr<Unit>& u) { return !keep(*u); });
}

std::vector<cudnnRNNAlgo_t> CudaRecurrentLayers::algos() const {
  if (forced_) return {*forced_};
  return {CUDNN_RNN_ALGO_STANDARD, CUDNN_RNN_ALGO_PERSIST_STATIC};
}

std::string CudaRecurrentLayers::tune_key(const Tensor& x, int64_t count, const char* what) const {
  return fmt::format("cudnn {} {} {} T={} N={} C={} H={} L={} D={} {}{}", cell_ == RnnCell::lstm ? "lstm" : "gru",
                     what, gpu_model(), x.shape[0], x.shape[1], x.shape[2], hidden_, count, dirs_,
                     dtype_name(compute_), unpacked_ ? " unpacked" : "");
}

std::string CudaRecurrentLayers::choose(const std::string& key,
                                        const std::vector<std::pair<std::string, std::function<void()>>>& runs) {
  std::vector<TuneCandidate> candidates;
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::function<void()>& run = runs[i].second;
    const auto step = [this, &run] {
      run();
      ST_CUDA(cudaStreamSynchronize(be_.stream()));
    };
    try {
      step();
    } catch (const Error&) {
      if (candidates.empty() && i + 1 == runs.size()) throw;  // none ran: the error is the last run's
      (void)cudaGetLastError();
      continue;
    }
    candidates.push_back({runs[i].first, step});
  }
  ST_CHECK(!candidates.empty(), "cuda recurrent layers: no candidate to time for {}", key);
  const std::string choice = tuner_->choose(key, candidates);
  // A cached choice this machine's cuDNN refuses: the first candidate that ran.
  for (const auto& c : candidates)
    if (c.name == choice) return choice;
  return candidates.front().name;
}

// One cuDNN RNN of u.count layers: no projection (projSize = hidden), no dropout (between
// cuDNN's own stacked layers: the stack runs whole only without dropout, and RnnStack applies
// its own between single layers). fp32: CUDNN_FMA_MATH, strict fp32 without TF32 tensor cores,
// because rnn_fp32 is held to the fp32 reference at 1e-4. bf16 / fp16: 16-bit data with fp32
// math precision on the tensor cores (CUDNN_TENSOR_OP_MATH).
void CudaRecurrentLayers::describe(Unit& u) {
  bind_stream();
  ST_CUDNN(cudnnSetDropoutDescriptor(u.dropout.get(), be_.cudnn(), 0.f, nullptr, 0, 0));
  const int H = to_int(hidden_, "hidden size");
  ST_CUDNN(cudnnSetRNNDescriptor_v8(u.rnn.get(), u.algo, cell_ == RnnCell::lstm ? CUDNN_LSTM : CUDNN_GRU,
                                    CUDNN_RNN_DOUBLE_BIAS, dirs_ == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                                    CUDNN_LINEAR_INPUT, data_type_, CUDNN_DATA_FLOAT,
                                    half() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH,
                                    to_int(u.in, "input width"), H, H, to_int(u.count, "layer count"),
                                    u.dropout.get(),
                                    padded_io_ ? CUDNN_RNN_PADDED_IO_ENABLED : CUDNN_RNN_PADDED_IO_DISABLED));
  ST_CUDNN(cudnnGetRNNWeightSpaceSize(be_.cudnn(), u.rnn.get(), &u.weight_bytes));
  u.weights.ensure(u.weight_bytes);
}

// Asks cuDNN for every matrix and bias address once (they depend on the descriptor only) and
// checks each has the size PyTorch's block has.
void CudaRecurrentLayers::find_slots(Unit& u) {
  TensorDesc mdesc, bdesc;
  const auto* base = static_cast<const char*>(u.weights.get());
  const int64_t H = hidden_, pseudo = u.count * dirs_;
  u.matrix_at.assign(pseudo * 2 * gates_, 0);
  u.bias_at.assign(pseudo * 2 * gates_, 0);
  for (int64_t p = 0; p < pseudo; ++p)
    for (int64_t id = 0; id < 2 * gates_; ++id) {
      void* m = nullptr;
      void* b = nullptr;
      ST_CUDNN(cudnnGetRNNWeightParams(be_.cudnn(), u.rnn.get(), static_cast<int32_t>(p), u.weight_bytes,
                                       u.weights.get(), static_cast<int32_t>(id), mdesc.get(), &m, bdesc.get(), &b));
      const int64_t cols = id < gates_ ? layer_in(u, p / dirs_) : H;
      ST_CHECK(m && b && descriptor_elements(mdesc.get()) == H * cols && descriptor_elements(bdesc.get()) == H,
               "cuda {}: cuDNN's weight {} of pseudo-layer {} is not a [{}, {}] matrix with a [{}] bias", u.what, id,
               p, H, cols, H);
      u.matrix_at[p * 2 * gates_ + id] = (static_cast<const char*>(m) - base) / elem_bytes_;
      u.bias_at[p * 2 * gates_ + id] = (static_cast<const char*>(b) - base) / elem_bytes_;
    }
}

// Descriptors and buffers for (T, N) and the lengths. Without lengths every sequence has length
// T, so cuDNN's SEQ_MAJOR_PACKED layout (at each step the batch's still-running sequences,
// longest first) is exactly the caller's time-major x [T, N, C] and y [T, N, H*dirs], the
// reverse direction's half in columns [H, 2H) as cuDNN concatenates it. With lengths the same
// arrays are SEQ_MAJOR_UNPACKED (every step holds all N rows, padding included), y's padding
// filled with zeros. Made again whenever the lengths change (host-side descriptor calls and one
// small upload a batch).
void CudaRecurrentLayers::set_shape(Unit& u, int64_t T, int64_t N, std::span<const int64_t> given) {
  const int t = to_int(T, "sequence length"), n = to_int(N, "batch size");
  std::vector<int> lengths(n, t);
  for (size_t i = 0; i < given.size(); ++i) lengths[i] = to_int(given[i], "sequence length");
  if (u.T == T && u.N == N && u.lengths == lengths) return;
  const int H = to_int(hidden_, "hidden size");
  const cudnnRNNDataLayout_t layout = given.empty() && !unpacked_ ? CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
                                                                    : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
  // The padding fill, read as the data type: zero bits are 0 in fp32, bf16 and fp16 alike.
  double zero = 0.0;
  ST_CUDNN(cudnnSetRNNDataDescriptor(u.xdesc.get(), data_type_, layout, t, n, to_int(u.in, "input width"),
                                     lengths.data(), &zero));
  ST_CUDNN(cudnnSetRNNDataDescriptor(u.ydesc.get(), data_type_, layout, t, n, to_int(H * dirs_, "output width"),
                                     lengths.data(), &zero));
  const int L = static_cast<int>(u.count * dirs_);
  const int dims[3] = {L, n, H}, strides[3] = {n * H, H, 1};
  ST_CUDNN(cudnnSetTensorNdDescriptor(u.hdesc.get(), data_type_, 3, dims, strides));
  // cuDNN reads the lengths again on the device, asynchronously: upload queues the copy on the
  // stream, after the calls that still read the previous batch's lengths.
  ST_CHECK(padded_io_ || (given.empty() && !unpacked_), "SEQTRAIN_CUDNN_RNN_PADDED_IO=0 runs full-length batches "
           "in the packed layout only: unset it for per-sample lengths or SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked");
  if (zero_state_) {
    const size_t state = static_cast<size_t>(u.count * dirs_ * n) * static_cast<size_t>(H) * elem_bytes_;
    ST_CUDA(cudaMemsetAsync(u.h0.ensure(2 * state), 0, 2 * state, be_.stream()));
  }
  u.seq_lengths.ensure(lengths.size() * sizeof(int));
  // A full-length batch's by a kernel: a captured step may be the one that comes back to this
  // shape (after an evaluation's), and an upload cannot be captured.
  if (given.empty()) ST_CUDA(launch_fill_lengths(static_cast<int*>(u.seq_lengths.get()), n, t, be_.stream()));
  else be_.upload(lengths.data(), u.seq_lengths.get(), lengths.size() * sizeof(int));
  size_t work_train = 0, work_infer = 0, reserve = 0, unused = 0;
  ST_CUDNN(cudnnGetRNNTempSpaceSizes(be_.cudnn(), u.rnn.get(), CUDNN_FWD_MODE_TRAINING, u.xdesc.get(), &work_train,
                                     &reserve));
  ST_CUDNN(cudnnGetRNNTempSpaceSizes(be_.cudnn(), u.rnn.get(), CUDNN_FWD_MODE_INFERENCE, u.xdesc.get(), &work_infer,
                                     &unused));
  workspace_.ensure(std::max(work_train, work_infer));
  u.reserve_bytes = reserve;  // allocated by the first training forward (evaluation needs none)
  u.T = T;
  u.N = N;
  u.lengths = std::move(lengths);
  u.trained = false;
}

void CudaRecurrentLayers::check_weights(std::span<const RecurrentWeights> ws, bool grads) const {
  for (size_t k = 0; k < ws.size(); ++k)
    for (int64_t d = 0; d < dirs_; ++d) {
      const RecurrentWeights& w = ws[k];
      ST_CHECK(w.w_ih[d] && w.w_hh[d] && w.b_ih[d] && w.b_hh[d],
               "cuda recurrent layer: direction {} of weight set {} has a null weight or bias pointer", d, k);
      ST_CHECK(!grads || (w.dw_ih[d] && w.dw_hh[d] && w.db_ih[d] && w.db_hh[d]),
               "cuda recurrent layer: direction {} of weight set {} has a null gradient pointer", d, k);
    }
}

template <class F>
void CudaRecurrentLayers::each_block(const Unit& u, F&& f) const {
  const int64_t G = gates_, H = hidden_;
  for (int64_t k = 0; k < u.count; ++k) {
    const int64_t in_w = layer_in(u, k);
    for (int64_t d = 0; d < dirs_; ++d)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t in = (k * dirs_ + d) * 2 * G + g, rec = in + G;  // PyTorch gate g -> linLayerIDs g, G + g
        f(k, d, 0, g * H * in_w, u.matrix_at[in], H * in_w);
        f(k, d, 1, g * H * H, u.matrix_at[rec], H * H);
        f(k, d, 2, g * H, u.bias_at[in], H);
        f(k, d, 3, g * H, u.bias_at[rec], H);
      }
  }
}

// The stack's blocks outnumber one launch's table (kRnnMaxBlocks per layer): a launch per layer.
void CudaRecurrentLayers::pack(Unit& u, std::span<const RecurrentWeights> ws) {
  char* space = static_cast<char*>(u.weights.get());
  std::vector<BlockTable> tables(u.count, BlockTable(space_));
  each_block(u, [&](int64_t k, int64_t d, int which, int64_t at, size_t slot, int64_t n) {
    const float* const* from[4] = {ws[k].w_ih, ws[k].w_hh, ws[k].b_ih, ws[k].b_hh};
    tables[k].add(from[which][d] + at, space + slot * elem_bytes_, n);
  });
  for (const BlockTable& t : tables) t.launch(false, be_.stream());
}

void CudaRecurrentLayers::add_grads(const Unit& u, std::span<const RecurrentWeights> ws, const void* grad_space) {
  const char* space = static_cast<const char*>(grad_space);
  std::vector<BlockTable> tables(u.count, BlockTable(space_));
  each_block(u, [&](int64_t k, int64_t d, int which, int64_t at, size_t slot, int64_t n) {
    float* const* to[4] = {ws[k].dw_ih, ws[k].dw_hh, ws[k].db_ih, ws[k].db_hh};
    tables[k].add(space + slot * elem_bytes_, to[which][d] + at, n);
  });
  for (const BlockTable& t : tables) t.launch(true, be_.stream());
}

void CudaRecurrentLayers::forward(size_t layer, const RecurrentWeights& w, const Tensor& x, const Tensor& y,
                                  Arena& arena, bool training, std::span<const int64_t> lengths) {
  ST_CHECK(layer < inputs_.size(), "cuda recurrent layer {} does not exist ({} layers)", layer, inputs_.size());
  const auto k = static_cast<int64_t>(layer);
  if (training && tuner_ && !forced_ && !layer_tuned_[layer]) {
    std::vector<std::pair<std::string, std::function<void()>>> runs;
    for (const cudnnRNNAlgo_t a : algos())
      runs.emplace_back(algo_name(a), [&, a] {
        Unit& u = unit(k, 1, a);
        run_forward(u, {&w, 1}, x, y, true, lengths);
        run_backward(u, {&w, 1}, y, arena, false, false);  // y as dy: its values do not change the work
      });
    const std::string choice = choose(tune_key(x, 1, "layer"), runs);
    layer_algo_[layer] = choice == "persist_static" ? CUDNN_RNN_ALGO_PERSIST_STATIC : CUDNN_RNN_ALGO_STANDARD;
    layer_tuned_[layer] = true;
    keep_units([&](const Unit& u) { return u.first != k || u.count != 1 || u.algo == layer_algo_[layer]; });
  }
  run_forward(unit(k, 1, layer_algo_[layer]), {&w, 1}, x, y, training, lengths);
}

Tensor CudaRecurrentLayers::backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena,
                                     bool want_dx) {
  ST_CHECK(layer < inputs_.size(), "cuda recurrent layer {} does not exist ({} layers)", layer, inputs_.size());
  return run_backward(unit(static_cast<int64_t>(layer), 1, layer_algo_[layer]), {&w, 1}, dy, arena, want_dx);
}

void CudaRecurrentLayers::forward_stack(std::span<const RecurrentWeights> w, const Tensor& x, const Tensor& y,
                                        Arena& arena, bool training, std::span<const int64_t> lengths) {
  ST_CHECK(stack_, "cuda recurrent layers: this stack runs a layer at a time (forward_stack called)");
  ST_CHECK(w.size() == inputs_.size(), "cuda recurrent stack: {} weight sets for {} layers", w.size(),
           inputs_.size());
  if (training && tuner_ && !plan_tuned_) {
    std::vector<std::pair<std::string, std::function<void()>>> runs;
    std::vector<Plan> plans;
    for (const bool whole : {false, true})
      if (!forced_whole_ || *forced_whole_ == whole)
        for (const cudnnRNNAlgo_t a : algos()) plans.push_back(Plan{whole, a});
    for (const Plan& p : plans)
      runs.emplace_back(plan_name(p), [&, p] {
        stack_forward(p, w, x, y, arena, true, lengths);
        stack_backward(p, w, y, arena, false, false);  // y as dy: its values do not change the work
      });
    const std::string choice = choose(tune_key(x, static_cast<int64_t>(w.size()), "stack"), runs);
    for (const Plan& p : plans)
      if (plan_name(p) == choice) plan_ = p;
    plan_tuned_ = true;
    const int64_t L = static_cast<int64_t>(inputs_.size());
    keep_units([&](const Unit& u) {
      return u.algo == plan_.algo && (plan_.whole ? u.count == L : u.count == 1);
    });
  }
  stack_forward(plan_, w, x, y, arena, training, lengths);
}

Tensor CudaRecurrentLayers::backward_stack(std::span<const RecurrentWeights> w, const Tensor& dy, Arena& arena,
                                           bool want_dx) {
  ST_CHECK(stack_, "cuda recurrent layers: this stack runs a layer at a time (backward_stack called)");
  ST_CHECK(w.size() == inputs_.size(), "cuda recurrent stack: {} weight sets for {} layers", w.size(),
           inputs_.size());
  return stack_backward(plan_, w, dy, arena, want_dx, true);
}

// A call per layer: the layers between hand over through the caller's arena (alive until its
// backward, as RnnStack's own layer outputs are).
void CudaRecurrentLayers::stack_forward(const Plan& p, std::span<const RecurrentWeights> ws, const Tensor& x,
                                        const Tensor& y, Arena& arena, bool training,
                                        std::span<const int64_t> lengths) {
  const int64_t L = static_cast<int64_t>(ws.size());
  if (p.whole) return run_forward(unit(0, L, p.algo), ws, x, y, training, lengths);
  Tensor in = x;
  for (int64_t k = 0; k < L; ++k) {
    const Tensor out = k + 1 < L ? arena.tensor({x.shape[0], x.shape[1], hidden_ * dirs_}) : y;
    run_forward(unit(k, 1, p.algo), ws.subspan(k, 1), in, out, training, lengths);
    in = out;
  }
}

Tensor CudaRecurrentLayers::stack_backward(const Plan& p, std::span<const RecurrentWeights> ws, const Tensor& dy,
                                           Arena& arena, bool want_dx, bool add) {
  const int64_t L = static_cast<int64_t>(ws.size());
  if (p.whole) return run_backward(unit(0, L, p.algo), ws, dy, arena, want_dx, add);
  Tensor d = dy;
  for (int64_t k = L; k-- > 0;) d = run_backward(unit(k, 1, p.algo), ws.subspan(k, 1), d, arena, k > 0 || want_dx, add);
  return d;
}

std::pair<const void*, const void*> CudaRecurrentLayers::initial_state(const Unit& u) const {
  if (!zero_state_) return {nullptr, nullptr};
  const size_t state = static_cast<size_t>(u.count * dirs_ * u.N * hidden_) * elem_bytes_;
  const char* h0 = static_cast<const char*>(u.h0.get());
  return {h0, cell_ == RnnCell::lstm ? h0 + state : nullptr};
}

void CudaRecurrentLayers::run_forward(Unit& u, std::span<const RecurrentWeights> ws, const Tensor& x,
                                      const Tensor& y, bool training, std::span<const int64_t> lengths) {
  ST_CHECK(x.shape.size() == 3 && x.shape[2] == u.in && x.contiguous(),
           "{} input must be a contiguous [time, batch, {}], got {}", u.what, u.in, shape_str(x.shape));
  const int64_t T = x.shape[0], N = x.shape[1];
  ST_CHECK(y.shape == Shape({T, N, hidden_ * dirs_}) && y.contiguous(),
           "{} output must be [{}, {}, {}], got {}", u.what, T, N, hidden_ * dirs_, shape_str(y.shape));
  ST_CHECK(device_accessible(x.ptr) && device_accessible(y.ptr),
           "cuda {}: x and y must be GPU memory (the activation Arena on the cuda backend's memory)", u.what);
  check_weights(ws, false);
  bind_stream();
  set_shape(u, T, N, lengths);
  u.padded = !lengths.empty();
  if (training) u.reserve.ensure(u.reserve_bytes);
  pack(u, ws);
  const auto [hx, cx] = initial_state(u);
  const void* x_in = x.ptr;
  void* y_out = y.ptr;
  if (half()) {
    x_in = u.x16.ensure(x.numel() * elem_bytes_);
    narrow(x.ptr, u.x16.get(), x.numel());
    y_out = u.y16.ensure(y.numel() * elem_bytes_);
  }
  ST_CUDNN(cudnnRNNForward(be_.cudnn(), u.rnn.get(), training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                           static_cast<const int32_t*>(u.seq_lengths.get()), u.xdesc.get(), x_in, u.ydesc.get(),
                           y_out, u.hdesc.get(), hx, nullptr, u.hdesc.get(), cx, nullptr, u.weight_bytes,
                           u.weights.get(), workspace_.bytes(), workspace_.get(), training ? u.reserve_bytes : 0,
                           training ? u.reserve.get() : nullptr));
  if (half()) widen(y_out, y.ptr, y.numel());
  u.x = x;
  u.y = y;
  u.trained = training;
}

// dx goes to the arena's memory when the GPU can write it. Until the activation Arena allocates
// through the backend (known gap), the arena hands out host memory: dx is then computed in an
// owned device buffer and copied into the arena's block, synchronously, so the returned Tensor
// is correct either way. BackwardData runs even without want_dx: BackwardWeights needs what it
// leaves in the reserve space.
Tensor CudaRecurrentLayers::run_backward(Unit& u, std::span<const RecurrentWeights> ws, const Tensor& dy,
                                         Arena& arena, bool want_dx, bool add) {
  ST_CHECK(u.trained, "cuda {}: backward needs a training forward first", u.what);
  ST_CHECK(dy.shape == u.y.shape && dy.contiguous(), "{} output gradient must be {}, got {}", u.what,
           shape_str(u.y.shape), shape_str(dy.shape));
  ST_CHECK(device_accessible(dy.ptr), "cuda {}: dy must be GPU memory", u.what);
  check_weights(ws, true);
  bind_stream();
  const auto [hx, cx] = initial_state(u);
  const Shape x_shape = u.x.shape;
  const int64_t dx_n = numel_of(x_shape);
  const size_t dx_bytes = static_cast<size_t>(dx_n) * sizeof(float);
  Tensor dx = want_dx ? arena.tensor(x_shape) : Tensor();
  const bool direct = want_dx && device_accessible(dx.ptr);
  void* dx_dev = direct ? dx.ptr : dx_sink_.ensure(dx_bytes);
  // What cuDNN reads and writes: the unit's own tensors in fp32, their 16-bit copies otherwise.
  const void* y_saved = half() ? u.y16.get() : u.y.ptr;
  const void* x_saved = half() ? u.x16.get() : u.x.ptr;
  const void* dy_in = dy.ptr;
  void* dx_out = dx_dev;
  if (half()) {
    dy_in = dy16_.ensure(dy.numel() * elem_bytes_);
    narrow(dy.ptr, dy16_.get(), dy.numel());
    dx_out = dx16_.ensure(dx_n * elem_bytes_);
  }
  // dx at padded steps is 0 (as PyTorch's padded gradient): cuDNN does not write there.
  if (u.padded) ST_CUDA(cudaMemsetAsync(dx_out, 0, dx_n * (half() ? elem_bytes_ : sizeof(float)), be_.stream()));
  ST_CUDNN(cudnnRNNBackwardData_v8(be_.cudnn(), u.rnn.get(), static_cast<const int32_t*>(u.seq_lengths.get()),
                                   u.ydesc.get(), y_saved, dy_in, u.xdesc.get(), dx_out, u.hdesc.get(), hx,
                                   nullptr, nullptr, u.hdesc.get(), cx, nullptr, nullptr, u.weight_bytes,
                                   u.weights.get(), workspace_.bytes(), workspace_.get(), u.reserve_bytes,
                                   u.reserve.get()));
  void* grads = grad_space_.ensure(u.weight_bytes);
  ST_CUDA(cudaMemsetAsync(grads, 0, u.weight_bytes, be_.stream()));
  ST_CUDNN(cudnnRNNBackwardWeights_v8(be_.cudnn(), u.rnn.get(), CUDNN_WGRAD_MODE_ADD,
                                      static_cast<const int32_t*>(u.seq_lengths.get()), u.xdesc.get(), x_saved,
                                      u.hdesc.get(), hx, u.ydesc.get(), y_saved, u.weight_bytes, grads,
                                      workspace_.bytes(), workspace_.get(), u.reserve_bytes, u.reserve.get()));
  if (add) add_grads(u, ws, grads);
  if (half() && want_dx) widen(dx_out, dx_dev, dx_n);
  if (want_dx && !direct) {
    ST_CUDA(cudaMemcpyAsync(dx.ptr, dx_dev, dx_bytes, cudaMemcpyDeviceToHost, be_.stream()));
    ST_CUDA(cudaStreamSynchronize(be_.stream()));
  }
  return dx;
}

}  // namespace

// The refusals name the op (as the reference backend's do); the last check keeps a checkpointed
// spec from running without checkpointing even if supports() were widened without a matching
// implementation here.
std::unique_ptr<RecurrentLayers> CudaBackend::make_recurrent(const RecurrentSpec& spec) {
  const DType compute = spec.options.precision.compute;
  if (compute == DType::bf16) require(BackendOp::rnn_bf16, "(runtime.precision bf16)");
  if (compute == DType::f16) require(BackendOp::rnn_fp16, "(runtime.precision fp16)");
  if (spec.options.grad_checkpoint) require(BackendOp::rnn_grad_checkpoint, "(train.grad_checkpoint)");
  require(BackendOp::rnn_fp32);
  ST_CHECK(!spec.options.grad_checkpoint,
           "the {} backend has no gradient-checkpointed recurrent layer (train.grad_checkpoint): use runtime.backend "
           "cpu for it",
           name());
  return std::make_unique<CudaRecurrentLayers>(*this, spec);
}

}  // namespace seqtrain::cuda
