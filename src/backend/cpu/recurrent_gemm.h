// RecurrentGemm: the per-time-step GEMM of an RNN layer against its recurrent weights W_hh,
// which stay fixed for the T steps of one forward (or backward) pass.
//
//   forward:  C[M, G] (+)= A[M, H] x W_hh^T    (the gates' recurrent projection)
//   backward: C[M, H] (+)= A[M, G] x W_hh      (dh_prev from the gate gradients)
//
// W_hh is PyTorch's [G, H] row-major. Run through dnnl_sgemm, every one of the T small calls
// (M = batch, e.g. 32 x 2048 x 512) copies all of W_hh into the GEMM kernel's blocked layout
// again, and at small batch that copy costs about as much as the multiply. Here prepare()
// reorders W_hh once per pass into the layout a dnnl::matmul primitive prefers
// (format_tag::any), and run() is then only the multiply. Primitive, packed weights and
// scratchpad are created the first time a shape is seen and kept (one entry per shape), so
// steady-state steps create and allocate nothing. In bf16 mode A is bf16 (raw bits) and
// prepare() rounds the fp32 W_hh to bf16 while reordering (nearest even, as f32_to_bf16).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace seqtrain {

class RecurrentGemm {
 public:
  enum class Op { forward, backward };
  struct Shape {
    Op op = Op::forward;
    bool bf16 = false;       // A and the packed weights in bf16, C fp32
    bool accumulate = false; // C += instead of C =
    int64_t M = 0, G = 0, H = 0;  // batch rows, G = gates * H, hidden size
    int64_t lda = 0, ldc = 0;     // row strides of A and C
    auto tie() const { return std::tie(op, bf16, accumulate, M, G, H, lda, ldc); }
    bool operator<(const Shape& o) const { return tie() < o.tie(); }
  };

  RecurrentGemm();
  ~RecurrentGemm();
  RecurrentGemm(RecurrentGemm&&) noexcept;
  RecurrentGemm& operator=(RecurrentGemm&&) noexcept;

  // Packs w_hh ([G, H] fp32) for shape s; the following run() calls use s and these weights.
  void prepare(const Shape& s, const float* w_hh);
  // One step: A and C as described by the prepared shape (A is uint16_t bf16 bits in bf16 mode).
  void run(const void* A, float* C);

  // oneDNN's implementation for the prepared shape (e.g. "brg:avx512_core"), for benchmarks.
  std::string impl() const;
  // Primitives created by every RecurrentGemm in the process (tests check steady state adds none).
  static size_t primitives_created();

 private:
  struct Entry;
  std::map<Shape, std::unique_ptr<Entry>> entries_;
  Entry* cur_ = nullptr;
};

}  // namespace seqtrain
