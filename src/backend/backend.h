// Backend: the device seam. Everything the nn layers, the optimizers and clipping compute goes
// through one of these, so that a device (CUDA next) is one more implementation under
// src/backend/<device>/ and nothing in nn/, optim/ or models/ asks which device runs it.
//
// The operations are the ones those callers need and no finer: a GEMM with a dtype (as cuBLAS's
// cublasGemmEx), the bias broadcast and bias-gradient row sums of Linear, a whole recurrent
// layer (all directions) forward and backward on PyTorch-layout weights (as cuDNN's RNN API and
// the CPU's fused kernels work: one call per layer), self-attention, the elementwise
// activations, cross-entropy fused with log-softmax, LayerNorm, the embedding gather and its
// scatter-add, dropout, AdamW and SGD over the flat parameter buffer with the optimizer's
// per-range decay flags, the L2 norm and scale of clipping, fp16's loss scaling, fill and copy. Pointers are device
// memory of this backend (host memory for cpu and reference): the parameter, gradient and
// optimizer buffers come from its allocate() (the memory section below), activations from the
// caller's Arena.
//
// A backend says which operations it has (supports()); asking one it lacks for an operation is
// a seqtrain::Error naming the operation and the backend, never a silent fallback.
// Implementations: backend/cpu (oneDNN + seqtrain's per-ISA kernels, the production path) and
// backend/reference (plain loops with fp64 accumulation: the oracle for tests and for CUDA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/activation_kind.h"
#include "backend/adamw_scalars.h"
#include "backend/attention_call.h"
#include "backend/autotune.h"
#include "backend/dropout_seed.h"
#include "backend/loss_scale_state.h"
#include "backend/precision.h"
#include "backend/rnn_cell.h"
#include "core/arena.h"
#include "core/device_memory.h"
#include "core/dtype.h"
#include "core/host_allocator.h"
#include "core/tensor.h"

namespace seqtrain {

// What a backend may or may not implement (Backend::supports, and the error when it does not).
enum class BackendOp : uint8_t {
  gemm_f32, gemm_bf16, gemm_f16,  // GEMM by operand dtype (fp32 accumulation in every case)
  bias,                            // bias_rows / bias_grad
  rnn_fp32, rnn_bf16, rnn_fp16,    // the recurrent layer by compute precision
  rnn_grad_checkpoint,             // the recurrent layer recomputing its saved state in backward
  adamw, sgd, norm, scale, fill, copy,
  activation,                      // the elementwise activations (ActKind)
  half_output,                     // activation_ / layer_norm_forward_half: outputs rounded to bf16 / f16
  attention_f32, attention_bf16,   // self-attention (causal or not, key padding) by product precision
  cross_entropy,                   // cross_entropy_forward / _backward
  layer_norm,                      // layer_norm_forward / _backward
  embedding,                       // embedding_forward / _backward
  dropout,                         // dropout_forward / _backward
  axpy,                            // y += alpha * x over activations (residual adds)
  transpose,                       // [A, B, C] -> [B, A, C] (time-major <-> batch-first)
  regression_loss,                 // regression_loss_forward / _backward (mse, mae, huber)
  token_ids,                       // token_ids: checked f32 / i64 values -> int64 ids
  conv1d,                          // im2col_1d / col2im_1d (nn/conv1d.h's columns)
  batch_norm,                      // batch_norm_forward / _backward (nn/batch_norm.h)
};
std::string_view backend_op_name(BackendOp op);

struct RnnOptions {
  // runtime.rnn_impl's word: which kernels a backend with a choice runs (the CPU's: "fused",
  // seqtrain's kernels on PyTorch's layout, or "onednn", oneDNN's RNN primitives; it refuses
  // another word). Backends with one implementation ignore it.
  std::string impl = "fused";
  // The run's policy (backend/precision.h): its compute type is the GEMM operands' (fp32 gate
  // math, state and master weights in every case).
  Precision precision;
  // Keep only each layer's input in forward; recompute the layer inside backward.
  bool grad_checkpoint = false;
  // At the first training forward of each layer shape, time the backend's candidate kernels
  // (CPU: fused at the active ISA level and at AVX2, oneDNN's primitive for fp32; CUDA: cuDNN's
  // plans and algorithms) and keep the fastest per layer.
  bool autotune = false;
  std::shared_ptr<Autotuner> autotuner;  // decisions shared with the caller (backend/autotune.h); made when null
};

// The shape of a stack of recurrent layers; the caller (nn/rnn.h's RnnStack) loops over layers.
struct RecurrentSpec {
  RnnCell cell = RnnCell::lstm;
  int64_t hidden = 0, dirs = 1;
  std::vector<int64_t> inputs;  // input width of each layer
  RnnOptions options;
};

// One layer's parameters and gradient destinations, per direction (index 0 forward, 1 reverse),
// in PyTorch's nn.LSTM / nn.GRU layout: W_ih [G*H, C], W_hh [G*H, H], b_ih, b_hh [G*H]; gates
// i,f,g,o / r,z,n. Gradients are added to.
struct RecurrentWeights {
  const float* w_ih[2] = {}; const float* w_hh[2] = {};
  const float* b_ih[2] = {}; const float* b_hh[2] = {};
  float* dw_ih[2] = {}; float* dw_hh[2] = {};
  float* db_ih[2] = {}; float* db_hh[2] = {};
};

// A backend's recurrent layers for one RecurrentSpec: whatever state a device keeps per layer
// between forward and backward (saved activations, packed weights, primitives, tuning).
class RecurrentLayers {
 public:
  virtual ~RecurrentLayers() = default;
  // x: time-major [T, N, C_layer]; y: [T, N, H*dirs] (direction d writes columns [d*H, (d+1)*H)).
  // Saved state comes from `arena` (or from the backend's own memory) and must outlive backward.
  // lengths: empty (every sample runs all T steps) or [N] host values in [1, T], checked by the
  // caller, alive until this layer's backward: sample n runs steps [0, lengths[n]) only, as
  // PyTorch's packed sequences do (the reverse direction starts at its last valid step); y is 0
  // at the other steps, and neither x nor dy there reaches any output or gradient.
  virtual void forward(size_t layer, const RecurrentWeights& w, const Tensor& x, const Tensor& y, Arena& arena,
                       bool training, std::span<const int64_t> lengths) = 0;
  // dy: [T, N, H*dirs] of the last forward of this layer. Adds the weight gradients; returns dx
  // [T, N, C_layer] when want_dx (an empty Tensor otherwise).
  virtual Tensor backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx) = 0;
  // The whole stack in one call, for a device whose library runs stacked layers together (cuDNN's
  // multi-layer RNN overlaps layer k + 1's step t with layer k's step t + 1, a wavefront the
  // layer-at-a-time calls cannot form). The caller uses it only when runs_stack() and nothing
  // (no dropout) sits between the layers; w holds every layer's weights, x is layer 0's input
  // and y the top layer's output, and backward_stack returns layer 0's dx when want_dx.
  virtual bool runs_stack() const { return false; }
  virtual void forward_stack(std::span<const RecurrentWeights> w, const Tensor& x, const Tensor& y, Arena& arena,
                             bool training, std::span<const int64_t> lengths);
  virtual Tensor backward_stack(std::span<const RecurrentWeights> w, const Tensor& dy, Arena& arena, bool want_dx);
  // Activation bytes held outside the caller's arena (gradient checkpointing's recompute arena).
  virtual size_t scratch_bytes() const { return 0; }
  // The name of the kernels layer k runs now, for the log and tests (the CPU backend after
  // autotuning: "fused" or "onednn"). A backend with one implementation reports "fused", the
  // seam's name for the default.
  virtual std::string layer_impl(size_t k) const { (void)k; return "fused"; }
};

// forward and backward of RecurrentLayers, for an implementation's class body (written once, as
// SEQTRAIN_BACKEND_OPERATIONS below).
#define SEQTRAIN_RECURRENT_LAYERS_PASSES                                                                        \
  void forward(size_t layer, const RecurrentWeights& w, const Tensor& x, const Tensor& y, Arena& arena,         \
               bool training, std::span<const int64_t> lengths) override;                                      \
  Tensor backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx) override;

// AdamW over params[0, n) (torch.optim.AdamW's arithmetic, optim/adamw.h), the hyperparameters
// as doubles, step the 1-based step. `runs` are the decay mask as [begin, end) ranges of equal
// flags, in order; a non-decaying run updates with weight decay 0, and elements between runs (a
// frozen or another parameter group's, one update call each) are not touched.
struct DecayRange {
  size_t begin = 0, end = 0;
  bool decay = true;
  bool operator==(const DecayRange&) const = default;
};
struct AdamWUpdate {
  float* params = nullptr; const float* grads = nullptr; float* m = nullptr; float* v = nullptr;
  const std::vector<DecayRange>* runs = nullptr;
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;
  // This backend's memory holding the update's step (adamw_prepare's t and scalars; a
  // non-decaying run takes the scalars' decay as 1): when set, the update reads it as it runs,
  // and the host values above are unused. A captured step (Backend::begin_capture) needs that:
  // its replays take each step's learning rate and bias corrections from there
  // (Optimizer::prepare), and so does a step whose skip only the device knows.
  const AdamWDeviceStep* device = nullptr;
  // A flag in this backend's memory (fp16's found-inf, optim/loss_scaler.h): when nonzero the
  // update leaves parameters and moments as they are. Null: always update.
  const float* skip = nullptr;
};
// The update's scalars for the kernels (backend/adamw_scalars.h), decay for a decaying run.
AdamWScalars adamw_scalars(const AdamWUpdate& u);
// SGD (torch.optim.SGD): momentum_buffer null without momentum; `first` is the first step (the
// buffer is then set to the gradient, as torch does).
struct SgdUpdate {
  float* params = nullptr; const float* grads = nullptr; float* momentum_buffer = nullptr;
  const std::vector<DecayRange>* runs = nullptr;
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, first = false;
};

// Multi-head self-attention over nanoGPT's c_attn output, one call per layer (as a fused
// attention kernel works: FlashAttention on a device, tiles with an online softmax on the CPU).
//   qkv [B, T, 3C]: q = columns [0, C), k = [C, 2C), v = [2C, 3C), each H heads of D = C / H
//   y   [B, T, C]:  softmax(q k^T / sqrt(D) + mask) v, heads merged (c_proj's input)
//   lse [B, H, T]:  each score row's logsumexp, written by forward, read by backward
// The mask: causal (the default, GPT's: query i sees keys j <= i) or none (causal = false: an
// encoder, masked pretraining), and on top of either an optional key-padding mask [B, T] of
// bytes, nonzero = that key is padding and gets no attention weight from any query (torch's
// key_padding_mask convention; padded *queries* are still computed, their rows are the caller's
// to ignore). A row that sees no key at all (every visible key padding, e.g. a sequence of
// padding only) has no softmax: by choice its output row is zeros, its lse -inf, and it passes
// zero gradient to q, k and v (torch's masked_fill(-inf) + softmax would give NaN there; the
// PyTorch parity script zeroes such rows the same way).
// Attention dropout (training): probability p *inside* the op, kept entries scaled by 1/(1-p);
// whether (b, h, i, j) is kept is attention_keep() of backend/attention_dropout.h, a pure
// function of (seed, b, h, i, j), so backward regenerates the mask and no implementation's
// result depends on its thread count or tiling. `compute` is the products' operand precision:
// f32, or bf16 (q, k, v, p and in backward dy and dS rounded to bf16; fp32 accumulation and
// fp32 softmax).
struct AttentionArgs {
  int64_t batch = 0, seq = 0, heads = 0, channels = 0;  // B, T, H, C
  DType compute = DType::f32;
  float dropout = 0.f;  // 0 outside training
  DropoutSeed seed;     // backend/dropout_seed.h: a value, or the step's seed in this backend's memory
  // The global batch row of row 0 (a data-parallel rank's shard): masks are keyed by b + this.
  int64_t batch_offset = 0;
  bool causal = true;                         // false: every query sees every (unpadded) key
  const uint8_t* key_padding_mask = nullptr;  // [B, T], nonzero = padding key; null: none
  const float* qkv = nullptr;
  float* y = nullptr;    // forward writes it; backward reads it (for D_i = rowsum(dy_i * y_i))
  float* lse = nullptr;  // forward writes it; backward reads it
};
// Throws a seqtrain::Error naming what is wrong (sizes, heads not dividing C, p outside [0, 1],
// a dtype other than f32/bf16, null pointers); every implementation calls it first.
void check_attention_args(const AttentionArgs& a);
// Checks a (check_attention_args) and resolves it for a kernel (backend/attention_call.h).
AttentionCall attention_call(const AttentionArgs& a);

// Checks a Backend::convert pair (f32 -> bf16 / f16, or back) and says whether it narrows (from
// f32) or widens; any other pair is an Error naming the backend and both types.
bool check_convert(std::string_view backend, DType from, DType to);

// Checks Backend::gemm_bias's C: contiguous (ldc == N), as the bias rows it adds assume.
void check_gemm_bias(std::string_view backend, int64_t N, int64_t ldc);

// Cross-entropy fused with log-softmax over the rows of logits [N, C] (torch's
// F.cross_entropy(logits, targets, ignore_index=..., reduction='sum') and its gradient):
//   loss_i = logsumexp(z_i) - z_i[t_i]  for every row whose target t_i is not ignore_index
// forward returns the sum of loss_i (accumulated in double), the count of such rows and how many
// of them have t_i as their largest logit (the first largest on ties, std::max_element's rule),
// so no caller reads the logits again for accuracy. backward overwrites dlogits [N, C] with
//   scale * (softmax(z_i) - onehot(t_i)) for counted rows, 0 for ignored rows.
// lse [N] is optional: forward writes each counted row's logsumexp there when given, backward
// reads it when given and recomputes it otherwise (the CPU does so in the row's one pass, from
// cache; nn/loss's stateless API passes none). Ignored rows' lse is left as it was.
// Targets live with the logits (device memory); each must be in [0, C) or ignore_index.
struct CrossEntropyArgs {
  int64_t rows = 0, classes = 0;  // N, C
  const float* logits = nullptr;
  const int64_t* targets = nullptr;
  int64_t ignore_index = -100;
  float* lse = nullptr;           // optional, see above
  // The caller has checked every target on the host (in [0, C) or ignore_index): a device may
  // skip reading its own check back (a synchronization) in cross_entropy_backward and
  // cross_entropy_accumulate.
  bool targets_checked = false;
};
struct CrossEntropySum {
  double loss = 0;
  int64_t count = 0, correct = 0;
};
// Throws a seqtrain::Error for non-positive sizes, null pointers or a target out of range
// (naming it, its row and the class count); every implementation calls it first.
void check_cross_entropy_args(const CrossEntropyArgs& a);

// LayerNorm over the last dimension of x [N, C] (torch.nn.LayerNorm(C, eps)):
//   forward   y = (x - mean) * rstd * weight (+ bias), rstd = 1 / sqrt(biased var + eps);
//             writes y [N, C] and each row's mean and rstd [N] (float) for backward.
//   backward  with xhat = (x - mean) * rstd, dxhat = dy * weight:
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) per row (overwritten);
//             dweight += column sums of dy * xhat, dbias += column sums of dy (dbias null: no bias).
// The column sums are added in an order that does not depend on the thread count.
struct LayerNormArgs {
  int64_t rows = 0, channels = 0;  // N, C
  float eps = 1e-5f;
  const float* x = nullptr;
  const float* weight = nullptr;   // [C]
  const float* bias = nullptr;     // [C] or null
  float* mean = nullptr;           // [N]: forward writes, backward reads
  float* rstd = nullptr;           // [N]
};
void check_layer_norm_args(const LayerNormArgs& a);

// An embedding table [rows, dim] looked up by `count` int64 ids (torch.nn.Embedding):
//   forward   y[i, :] = table[ids[i], :] (accumulate: y[i, :] += it, as GPT adds the position
//             rows onto the token rows)
//   backward  dtable[ids[i], :] += dy[i, :] for every i. Repeated ids sum in the order of i
//             whatever the thread count, so the result is deterministic.
// Ids live with the table (device memory); one outside [0, rows) is an Error naming it.
struct EmbeddingArgs {
  int64_t rows = 0, dim = 0, count = 0;
  const int64_t* ids = nullptr;
  // The caller knows every id is in [0, rows) (token ids checked by token_ids, position ids it
  // made): a device may skip reading its own check back (a synchronization).
  bool ids_checked = false;
};
void check_embedding_args(const EmbeddingArgs& a);

// Inverted dropout over n elements (torch.nn.Dropout in training): y = x / (1 - p) where kept,
// 0 where dropped (p = 1: all zeros). Whether element i is kept is dropout_keep() of
// backend/dropout_mask.h, a pure function of (seed, i): backward regenerates the mask instead of
// storing one, and no implementation's result depends on its thread count.
void check_dropout_args(const float* x, const float* y, int64_t n, float p);

// The columns of a 1-D convolution over x [B, T, C] (batch-first, channels last; nn/conv1d.h), so
// the convolution itself is one GEMM with torch's Conv1d weight [C_out, C, k] read as [C_out, C*k]:
//   im2col_1d  cols[b*T + t, c*k + j] = x[b, t + j - pad_left, c], 0 where that step is outside
//              [0, T) or padding (mask[b, s] nonzero): padded steps read as zeros, so their values
//              never reach an output
//   col2im_1d  dx[b, s, c] = sum over j of dcols[b*T + s - j + pad_left, c*k + j] (the rows inside
//              [0, T)), overwritten; 0 at padded steps. A gather per dx element: no atomics, and the
//              sum's order is fixed (j ascending) on every backend
// mask: null, or [B, T] u8 in the backend's memory (nonzero = padding: nn/sequence_pool.h's
// padding_mask).
struct Conv1dArgs {
  int64_t batch = 0, steps = 0, channels = 0;  // B, T, C
  int64_t kernel = 1, pad_left = 0;            // k, and the zeros before step 0 (torch's "same": (k-1)/2)
  const uint8_t* mask = nullptr;
};
// Throws a seqtrain::Error for non-positive sizes or a pad_left outside [0, k); every
// implementation calls it first.
void check_conv1d_args(const Conv1dArgs& a);

// BatchNorm per channel over the rows of x [N, C] (torch.nn.BatchNorm1d(C, eps, momentum) on
// channels-last activations, nn/batch_norm.h), the rows a mask marks as padding left out:
//   forward, training  mean[c], var[c] = the mean and biased variance of x[:, c] over the `count`
//                      valid rows (two passes, double sums, rows ascending); rstd = 1/sqrt(var+eps);
//                      running_mean = (1-m) running_mean + m mean, running_var = (1-m) running_var
//                      + m var * count/(count-1) (the unbiased variance, as torch), both in double
//                      and stored as float; num_batches_tracked += 1. All on the device: nothing is
//                      read back.
//   forward, eval      mean = running_mean, rstd = 1/sqrt(running_var + eps); nothing updated.
//   both               writes mean and rstd [C] (for backward) and y = (x - mean) rstd weight + bias
//                      at valid rows, 0 at padded ones.
//   backward           with xhat = (x - mean) rstd and the column sums over valid rows (double,
//                      rows ascending) S = sum dy, P = sum dy xhat:
//                      training  dx = weight rstd (dy - S/count - xhat P/count)
//                      eval      dx = weight rstd dy (the statistics are constants)
//                      at valid rows, 0 at padded ones (overwritten); dweight += P, dbias += S, each
//                      skipped when null (a frozen tensor).
// Every sum runs in one fixed order, so the results do not depend on threads or launches.
// mask: null, or [N] u8 in the backend's memory (nonzero = padding: nn/sequence_pool.h's [B, T]
// padding mask read as N = B*T rows); count is the number of valid rows, which the caller knows
// from the batch's lengths (so no backend counts on the host).
struct BatchNormArgs {
  int64_t rows = 0, channels = 0;  // N, C
  int64_t count = 0;               // valid rows (N without a mask); training needs >= 2
  float eps = 1e-5f, momentum = 0.1f;
  bool training = true;
  const float* x = nullptr;        // [N, C]
  const uint8_t* mask = nullptr;   // [N] or null
  const float* weight = nullptr;   // [C]
  const float* bias = nullptr;     // [C]
  float* mean = nullptr;           // [C]: forward writes, backward reads
  float* rstd = nullptr;           // [C]
  float* running_mean = nullptr;   // [C]: forward reads (eval) or updates (training)
  float* running_var = nullptr;    // [C]
  float* num_batches_tracked = nullptr;  // [1]: training adds 1
};
// Throws a seqtrain::Error for bad sizes, a count outside [1, N] (training: [2, N]) or a missing
// pointer; every implementation calls it first.
void check_batch_norm_args(const BatchNormArgs& a);

// The regression losses over n (prediction, target) pairs, d = pred - target (nn/loss.h):
//   mse  sum d^2        gradient 2 k d
//   mae  sum |d|        gradient k sign(d)
//   huber sum h(d), h = d^2 / 2 if |d| < delta else delta (|d| - delta / 2)
//                       gradient k clamp(d, -delta, delta)
// forward returns the sum to the host, accumulated in double with d formed in double (as
// cross_entropy_forward returns its sums; the training step uses regression_loss_accumulate,
// which keeps the sum in the backend's memory); backward
// overwrites grad [n] with the float expressions above, k the caller's scale.
enum class RegressionLoss : uint8_t { mse, mae, huber };

// The quantile (pinball) loss's operands (nn/loss.h): `targets` values y, each with `levels`
// forecasts p (innermost) at the levels taus[0 .. levels).
struct QuantileArgs {
  const float* pred = nullptr;    // [targets, levels]
  const float* target = nullptr;  // [targets]
  int64_t targets = 0, levels = 0;
  const float* taus = nullptr;    // host memory
};

class Backend : public DeviceMemory {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(BackendOp op) const = 0;
  // Throws Error "<backend> backend has no <op>" unless supports(op); `what` adds context.
  void require(BackendOp op, std::string_view what = {}) const;

  // ---- Memory: where parameters, gradients and optimizer state live (backend/device_buffer.h) ----
  // `bytes` bytes of this backend's device memory, uninitialised, aligned to at least
  // kDeviceAlignment (the CPU backend: 64 bytes, a page for large buffers); null for 0 bytes.
  virtual void* allocate(size_t bytes) = 0;
  // Frees what this backend's allocate() returned; anything else (another backend's buffer, a
  // second release) is an Error naming the backend. Null is ignored.
  virtual void release(void* p) = 0;
  // True when this backend's device memory is host memory that host code may read and write
  // directly (cpu, reference). When false, host code reaches it only through the two copies
  // below (nn/params.h states the host-access contract).
  virtual bool host_accessible() const = 0;
  // Device -> host and host -> device copies of `bytes` bytes; the device side must lie inside one
  // live allocation of this backend (an Error otherwise).
  virtual void copy_to_host(const void* device_src, void* host_dst, size_t bytes) = 0;
  virtual void copy_from_host(const void* host_src, void* device_dst, size_t bytes) = 0;
  // copy_from_host that may return before the copy has run (a step's batch: the GPU's previous
  // work need not finish first); host_src is reusable at once all the same (the backend stages
  // it). The default is copy_from_host.
  virtual void upload(const void* host_src, void* device_dst, size_t bytes);
  // DeviceMemory's zero, through fill (bytes a multiple of 4).
  void zero(void* p, size_t bytes) final { fill(static_cast<float*>(p), bytes / sizeof(float), 0.f); }
  // Page-locked host memory for buffers the host fills and this backend reads (the loader's
  // slots), from which copies to the device can run asynchronously; nullptr when the backend
  // reads host memory directly (cpu, reference) and ordinary memory is best. Owned by the backend.
  virtual HostAllocator* pinned_allocator() { return nullptr; }

  // ---- The batch's copy lane (backend/batch_landing.h) ----
  // A GPU copies the next batch while the current step computes: uploads go on a second lane (a
  // stream beside the compute stream), and marks order the two lanes and the host. A mark is the
  // work queued on one lane so far; waiting for it on the other lane orders that lane's later
  // work after it without the host waiting, and host_wait blocks the calling thread (any thread:
  // the loader's workers wait for the copies reading their slots). Mark seq 0 is passed already.
  // The defaults (cpu, reference, and any backend that says has_copy_lane() false): upload_async
  // is upload() and every mark has passed, so a step's copies and order are today's.
  enum class Lane : uint8_t { compute, copy };
  struct LaneMark {
    Lane lane = Lane::compute;
    uint64_t seq = 0;
  };
  virtual bool has_copy_lane() const { return false; }
  // upload() on the copy lane. Host memory of pinned_allocator() is read directly, by the copy
  // itself: that buffer is not rewritten until the copy has run (HostAllocator::await_readers
  // waits for it); other host memory is staged, reusable at once.
  virtual void upload_async(const void* host_src, void* device_dst, size_t bytes);
  virtual LaneMark mark(Lane lane) { return {lane, 0}; }
  virtual void wait(Lane waiter, LaneMark m) { (void)waiter, (void)m; }
  virtual void host_wait(LaneMark m) { (void)m; }
  // Bytes of this backend's device memory free now (train.batch_size: auto sizes the batch to
  // them); 0 when the memory is the host's, which the caller measures itself (MemAvailable).
  virtual size_t device_free_bytes() { return 0; }

  // ---- Capture (runtime.cuda_graphs; train/step_graphs.h) ----
  // A GPU running a small model spends much of a step launching kernels one by one; a captured
  // step is recorded once and replayed as one launch (a CUDA graph). Between begin_capture and
  // end_capture the operations are recorded, not run, with the pointers and host scalars they
  // were given: a replay reads and writes the same addresses, so whatever changes per step (the
  // batch, the optimizer's scalars) must reach them through memory the caller updates with
  // upload() before each replay. While capturing, what cannot be recorded is an Error: an
  // operation that returns a host value, a copy, an allocation or release. The caller then
  // abort_capture()s and runs the step uncaptured. The defaults (cpu, reference: nothing to
  // gain, the host calls its kernels directly) say supports_capture() false and refuse the rest.
  virtual bool supports_capture() const { return false; }
  virtual void begin_capture();
  // The capture's handle for replay and drop.
  virtual uint64_t end_capture();
  // Ends a capture that failed part-way; nothing of it is kept.
  virtual void abort_capture();
  // Queues the captured operations once more. False, with nothing run, when memory the capture
  // used may have moved (this backend released memory since): the caller drops it and captures
  // again.
  virtual bool replay(uint64_t capture);
  virtual void drop(uint64_t capture);

  // C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, lda/ldb/ldc the row strides as stored
  // (backend/cpu/gemm.h's conventions). `in` is A's and B's dtype (f32, or bf16/f16 raw 16-bit
  // bits), C is f32 and the products accumulate in fp32 (at least). For 16-bit inputs only
  // alpha = 1 and beta in {0, 1} are allowed (the CPU's 16-bit GEMMs accumulate or overwrite).
  virtual void gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
                    int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc) = 0;
  // dst[i] = src[i] converted, n elements: f32 -> bf16 / f16 rounds to nearest even (NaN stays
  // NaN, fp16 overflows to inf), bf16 / f16 -> f32 widens exactly; 16-bit values are raw bits.
  // What a layer hands a 16-bit GEMM (nn/linear.h). Every backend converts both ways for bf16 and
  // f16, also one without their GEMM (the reference: tests round operands through it to build a
  // 16-bit GEMM's oracle); other pairs are an Error.
  virtual void convert(DType from, const void* src, DType to, void* dst, size_t n) = 0;
  // y[i, j] = b[j] for rows x cols (Linear seeds its output with the bias, then the GEMM adds).
  virtual void bias_rows(const float* b, float* y, int64_t rows, int64_t cols) = 0;
  // db[j] += sum over rows i of dy[i, j].
  virtual void bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) = 0;

  // C[M,N] = op(A) op(B) + bias[N] on every row (alpha 1; C contiguous, ldc == N): a Linear's
  // forward. The default is bias_rows, then the GEMM accumulating onto it; a backend whose GEMM
  // adds a bias itself (the CPU's bf16 matmul: no seeding pass, no read of C) overrides it.
  virtual void gemm_bias(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                         const void* B, int64_t ldb, const float* bias, float* C, int64_t ldc);

  virtual std::unique_ptr<RecurrentLayers> make_recurrent(const RecurrentSpec& spec) = 0;

  virtual void adamw(const AdamWUpdate& u) = 0;
  virtual void sgd(const SgdUpdate& u) = 0;
  // sqrt(sum of x[i]^2), accumulated in double; Inf/NaN when any element is non-finite.
  virtual double l2_norm(const float* x, size_t n) = 0;
  virtual void scale(float* x, size_t n, float s) = 0;  // x[i] *= s
  virtual void fill(float* x, size_t n, float v) = 0;
  virtual void copy(const float* src, float* dst, size_t n) = 0;

  // Self-attention (AttentionArgs above): forward writes a.y and a.lse.
  virtual void attention_forward(const AttentionArgs& a) = 0;
  // dy [B, T, C] -> dqkv [B, T, 3C] (overwritten), from the forward's a.qkv, a.y, a.lse and the
  // same dropout, seed, causal flag and key-padding mask.
  virtual void attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) = 0;
  // y[i] = f(x[i]); dx[i] = dy[i] f'(x[i]) (ReLU, Tanh, Sigmoid read y; GELU reads x), as torch.
  virtual void activation_forward(ActKind k, const float* x, float* y, int64_t n) = 0;
  virtual void activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                   int64_t n) = 0;
  // y[i] = f(x[i]) rounded to `to` (bf16 / f16, raw bits) in the same pass: the input of a 16-bit
  // Linear written once, not as fp32 and then converted (twice the traffic: GPT's MLP at the
  // recipe's batch is memory-bound there). Only backends that say supports(half_output); the
  // default is an Error naming the operation.
  virtual void activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n);
  // Cross-entropy (CrossEntropyArgs above): the sums of forward; backward writes dlogits.
  virtual CrossEntropySum cross_entropy_forward(const CrossEntropyArgs& a) = 0;

  // ---- The training step's scalars, kept in this backend's memory (no host read per step) ----
  // The step reads its loss once per log interval, so these add into `acc`, doubles in this
  // backend's memory, instead of returning to the host; a device queues them with the rest of
  // the step. The defaults (any host-accessible backend) call the returning op and add.
  // acc[0] += regression_loss_forward(...).
  virtual void regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                          float delta, double* acc);
  // acc[0] += the loss sum, acc[1] += the correct rows (the count is the caller's: it counts the
  // targets on the host, train/objective.h). a.targets_checked lets a device skip reading its
  // target check back (the caller checked every target on the host).
  virtual void cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc);
  // The quantile loss (QuantileArgs): the sum of max(tau e, (tau - 1) e), e = y - p, over every
  // forecast; backward writes k * its gradient (1 - tau where p > y, -tau where p < y, 1/2 - tau at
  // a tie). The defaults are host loops (any host-accessible backend); others refuse by name.
  virtual double quantile_loss_forward(const QuantileArgs& a);
  virtual void quantile_loss_backward(const QuantileArgs& a, float k, float* grad);
  // Quantiles that never cross, from unconstrained values, per group of `levels` values:
  // out[0] = raw[0], out[j] = out[j-1] + softplus(raw[j]) (torch's Softplus: threshold 20).
  // backward: draw[j] = (sum over i >= j of dout[i]) times 1 (j = 0) or sigmoid(raw[j]). Host
  // loops by default, like the quantile loss.
  virtual void monotone_quantiles_forward(const float* raw, float* out, int64_t groups, int64_t levels);
  virtual void monotone_quantiles_backward(const float* raw, const float* dout, float* draw, int64_t groups,
                                           int64_t levels);
  // The elementwise max over each sample's unpadded steps (nn/sequence_pool.h's max pooling):
  // x [B, T, C], mask null or [B, T] u8 (nonzero = padding; every sample has an unpadded step):
  // y[b, c] = max over unpadded t of x[b, t, c], arg[b, c] = that t (the first on ties);
  // backward overwrites dx [B, T, C] with dy[b, c] at (b, arg[b, c], c) and 0 elsewhere.
  // Host loops by default, like the quantile ops.
  virtual void masked_max_forward(const float* x, const uint8_t* mask, int64_t B, int64_t T, int64_t C, float* y,
                                  int32_t* arg);
  virtual void masked_max_backward(const float* dy, const int32_t* arg, int64_t B, int64_t T, int64_t C, float* dx);
  // torch.nn.utils.clip_grad_norm_ decided where g lives: *norm = ||g||_2 (double); when
  // max_norm > 0 and the norm is finite, g *= max_norm / (norm + 1e-6) if that is below 1
  // (optim/clip.h's rule, non-finite gradients left alone). skip: null, or a flag in this
  // backend's memory (fp16's found-inf) that, when nonzero, leaves g and *norm as they are.
  virtual void clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip);
  // fp16's dynamic loss scaling where the gradients are (optim/loss_scaler.h; torch's
  // _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_), state in this backend's
  // memory (backend/loss_scale_state.h). scale_by: x[i] *= *s (the loss gradient times the
  // scale). unscale_grads: g[i] *= inverse_loss_scale(st->scale), and st->found_inf = 1 when any
  // result is inf or NaN, else 0. update_loss_scale: update_loss_scale_state(*st, rule).
  virtual void scale_by(float* x, size_t n, const float* s);
  virtual void unscale_grads(float* g, size_t n, LossScaleState* st);
  virtual void update_loss_scale(LossScaleState* st, const LossScaleRule& rule);
  // AdamW's per-step scalars formed in this backend's memory (adamw_prepare_steps of
  // backend/adamw_scalars.h): each step's t = its host count minus *skips, then *skips += 1 when
  // *skip is set (null skip or skips: no skipping).
  virtual void adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips);
  virtual void cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) = 0;
  // LayerNorm (LayerNormArgs above): forward writes y, a.mean, a.rstd; backward reads them.
  virtual void layer_norm_forward(const LayerNormArgs& a, float* y) = 0;
  // The same with y rounded to `to` (bf16 / f16) as it is written, for the 16-bit Linear after it
  // (its backward reads x, mean and rstd, never y). Backends that say supports(half_output).
  virtual void layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y);
  virtual void layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight,
                                   float* dbias) = 0;
  // Embedding (EmbeddingArgs above).
  virtual void embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) = 0;
  virtual void embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) = 0;
  // Dropout: y = keep(seed, i) ? x / (1 - p) : 0; backward is the same map on dy with the same
  // (p, seed). The seed is resolve_seed(seed) as the op runs (backend/dropout_seed.h).
  virtual void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) = 0;
  virtual void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) = 0;
  // The same map with element i keyed as element first + i of the mask (forward on x, backward
  // on dy alike): a data-parallel rank's shard of a tensor draws the one-process run's mask. A
  // backend without it serves first = 0 only.
  virtual void dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) {
    ST_CHECK(first == 0, "dropout: the {} backend cannot key a shard's dropout mask by the global sample (a "
             "data-parallel run on it draws each rank's masks by its local rows)", name());
    dropout_forward(x, y, n, p, seed);
  }

  // ---- Activations: what models did with host loops before activations moved to the device ----
  // y[i] += alpha * x[i] (float arithmetic; alpha = 1 gives exactly y + x).
  virtual void axpy(float alpha, const float* x, float* y, size_t n) = 0;
  // out[i] = a[i] + b[i] (the residual add): copy, then axpy(1), in one pass where a backend can.
  virtual void add(const float* a, const float* b, float* out, size_t n);
  // y[b, a, :] = x[a, b, :] for x [A, B, C] contiguous, y [B, A, C] contiguous (RNN stacks work
  // time-major, models and losses batch-first).
  virtual void transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) = 0;
  // RegressionLoss above: the sum (to the host) and the overwritten gradient.
  virtual double regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                         float delta) = 0;
  virtual void regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                        float delta, float k, float* grad) = 0;
  // ids[i] = x[i] for n values of dtype `from` (f32 or i64) that must be whole numbers in
  // [0, vocab): the language models' input check. Returns -1 when all are, otherwise the index of
  // the first that is not (ids then unspecified; the caller reads that one value back to say
  // why): one host-returned scalar, as the loss sums.
  virtual int64_t token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) = 0;
  // token_ids for values the caller has already checked on the host (the training step's
  // batch): the conversion only, nothing read back. The default calls token_ids.
  virtual void token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab);
  // Conv1dArgs above: cols [B*T, C*k] and dx [B, T, C], both overwritten.
  virtual void im2col_1d(const Conv1dArgs& a, const float* x, float* cols) = 0;
  virtual void col2im_1d(const Conv1dArgs& a, const float* dcols, float* dx) = 0;
  // BatchNormArgs above: y [N, C] overwritten, a.mean / a.rstd written (and the running
  // statistics updated when a.training); backward overwrites dx [N, C] and adds into dweight and
  // dbias where they are not null.
  virtual void batch_norm_forward(const BatchNormArgs& a, float* y) = 0;
  virtual void batch_norm_backward(const BatchNormArgs& a, const float* dy, float* dx, float* dweight,
                                   float* dbias) = 0;
};

// The overrides of every operation above, for a concrete backend's class body: the list is
// written once, so an operation added to Backend is declared for every backend in one place
// (and a backend that lacks its definition fails to link rather than to compile silently).
#define SEQTRAIN_BACKEND_ROW_AND_LAYER_OPS                                                                                  \
  bool supports(BackendOp op) const override;                                                                        \
  void gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A, int64_t lda,     \
            const void* B, int64_t ldb, float beta, float* C, int64_t ldc) override;                                 \
  void convert(DType from, const void* src, DType to, void* dst, size_t n) override;                                \
  void bias_rows(const float* b, float* y, int64_t rows, int64_t cols) override;                                     \
  void bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) override;                                   \
  std::unique_ptr<RecurrentLayers> make_recurrent(const RecurrentSpec& spec) override;                               \
  void adamw(const AdamWUpdate& u) override;                                                                         \
  void sgd(const SgdUpdate& u) override;                                                                             \
  double l2_norm(const float* x, size_t n) override;                                                                 \
  void scale(float* x, size_t n, float s) override;                                                                  \
  void fill(float* x, size_t n, float v) override;                                                                   \
  void copy(const float* src, float* dst, size_t n) override;                                                        \
  void attention_forward(const AttentionArgs& a) override;                                                           \
  void attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) override;                            \
  void activation_forward(ActKind k, const float* x, float* y, int64_t n) override;                                  \
  void activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx, int64_t n) override; \
  CrossEntropySum cross_entropy_forward(const CrossEntropyArgs& a) override;                                         \
  void cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) override;                    \
  void layer_norm_forward(const LayerNormArgs& a, float* y) override;                                                \
  void layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight, float* dbias)        \
      override;                                                                                                      \
  void embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) override;           \
  void embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) override;                         \
  void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) override;                      \
  void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) override;

// Every operation: what a backend with its own memory (CUDA, the tests' guarded one) declares.
#define SEQTRAIN_BACKEND_OPERATIONS SEQTRAIN_BACKEND_ROW_AND_LAYER_OPS SEQTRAIN_BACKEND_ACTIVATION_OPS

// The activation ops (axpy, transpose, regression losses, token ids, the convolution's columns,
// BatchNorm) on their own: the backends
// whose memory is the host's share one implementation of them (HostMemoryBackend) and declare
// the rest with SEQTRAIN_BACKEND_ROW_AND_LAYER_OPS.
#define SEQTRAIN_BACKEND_ACTIVATION_OPS                                                                         \
  void axpy(float alpha, const float* x, float* y, size_t n) override;                                               \
  void transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) override;                                \
  double regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,             \
                                 float delta) override;                                                              \
  void regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n, float delta, \
                                float k, float* grad) override;                                                      \
  int64_t token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) override;      \
  void im2col_1d(const Conv1dArgs& a, const float* x, float* cols) override;                                         \
  void col2im_1d(const Conv1dArgs& a, const float* dcols, float* dx) override;                                       \
  void batch_norm_forward(const BatchNormArgs& a, float* y) override;                                                \
  void batch_norm_backward(const BatchNormArgs& a, const float* dy, float* dx, float* dweight, float* dbias) override;

// The capture calls above, for the class body of a backend that captures (CUDA, the tests'
// recording one).
#define SEQTRAIN_BACKEND_CAPTURE                                \
  bool supports_capture() const override { return true; }      \
  void begin_capture() override;                                \
  uint64_t end_capture() override;                              \
  void abort_capture() override;                                \
  bool replay(uint64_t capture) override;                       \
  void drop(uint64_t capture) override;

// The memory functions above, for a concrete backend's class body (kept apart from
// SEQTRAIN_BACKEND_OPERATIONS: memory and operations change independently).
#define SEQTRAIN_BACKEND_MEMORY                                                       \
  void* allocate(size_t bytes) override;                                              \
  void release(void* p) override;                                                     \
  void copy_to_host(const void* device_src, void* host_dst, size_t bytes) override;   \
  void copy_from_host(const void* host_src, void* device_dst, size_t bytes) override;


// The backends by runtime.backend name ("cpu", "reference"): one instance each for the process
// (they hold no per-run state; per-layer state lives in what make_recurrent returns). Callers
// get theirs from the model's ParamStore, not from here; an unknown name is an Error.
Backend& backend_named(std::string_view name);
// The CPU backend: what a ParamStore or optimizer uses when nobody chose another.
Backend& default_backend();

}  // namespace seqtrain
