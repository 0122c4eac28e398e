// SequencePool forward/backward. See sequence_pool.h.
//   last / first  y[b] = x[b, t_b]                   dx[b, t_b] = dy[b]
//   mean          y[b] = (1/n_b) 1[1, n_b] x[b, :n_b]  dx[b, :n_b] = (1/n_b) 1[n_b, 1] dy[b]
//   max           the backend's masked_max op, which keeps the winning step per channel
#include <cstring>
#include <vector>

#include "nn/sequence_pool.h"

namespace seqtrain {

PoolKind pool_kind(const std::string& word) {
  if (word == "last") return PoolKind::last;
  if (word == "cls") return PoolKind::first;
  if (word == "mean") return PoolKind::mean;
  if (word == "max") return PoolKind::max;
  fail("model.pooling '{}' is not known: use last, mean, max or cls", word);
}

const uint8_t* padding_mask(std::span<const int64_t> valid, int64_t T, Arena& arena, Backend& backend) {
  if (valid.empty()) return nullptr;
  const auto B = static_cast<int64_t>(valid.size());
  std::vector<uint8_t> mask(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) mask[static_cast<size_t>(b * T + t)] = t >= valid[static_cast<size_t>(b)];
  Tensor dev = arena.tensor({(B * T + 3) / 4});  // bytes in float storage
  if (arena.host_accessible()) std::memcpy(dev.ptr, mask.data(), mask.size());
  else backend.upload(mask.data(), dev.ptr, mask.size());
  return static_cast<const uint8_t*>(dev.ptr);
}

Tensor SequencePool::forward(const Tensor& x, std::span<const int64_t> valid, const uint8_t* mask, Arena& arena) {
  ST_CHECK(x.shape.size() == 3 && x.contiguous(), "SequencePool: input {} must be a contiguous [B, T, C]",
           shape_str(x.shape));
  B_ = x.dim(0);
  T_ = x.dim(1);
  C_ = x.dim(2);
  ST_CHECK(valid.empty() || static_cast<int64_t>(valid.size()) == B_, "SequencePool: {} lengths for a batch of {}",
           valid.size(), B_);
  valid_.assign(valid.begin(), valid.end());
  for (int64_t b = 0; b < B_; ++b)
    ST_CHECK(steps(b) >= 1 && steps(b) <= T_, "SequencePool: sample {} has {} valid steps; each needs 1 to {}", b,
             steps(b), T_);
  Tensor y = arena.tensor({B_, C_});
  const float* xp = x.f32();
  switch (kind_) {
    case PoolKind::last:
    case PoolKind::first:
      for (int64_t b = 0; b < B_; ++b) {
        const int64_t t = kind_ == PoolKind::last ? steps(b) - 1 : 0;
        backend_.copy(xp + (b * T_ + t) * C_, y.f32() + b * C_, static_cast<size_t>(C_));
      }
      break;
    case PoolKind::mean:
      ones_ = arena.tensor({T_});
      backend_.fill(ones_.f32(), static_cast<size_t>(T_), 1.f);
      for (int64_t b = 0; b < B_; ++b)
        backend_.gemm(DType::f32, false, false, 1, C_, steps(b), 1.f / static_cast<float>(steps(b)), ones_.f32(), T_,
                      xp + b * T_ * C_, C_, 0.f, y.f32() + b * C_, C_);
      break;
    case PoolKind::max:
      arg_ = arena.tensor({B_, C_}, DType::i32);
      backend_.masked_max_forward(xp, valid.empty() ? nullptr : mask, B_, T_, C_, y.f32(), arg_.data<int32_t>());
      break;
  }
  return y;
}

Tensor SequencePool::backward(const Tensor& dy, Arena& arena) {
  ST_CHECK(dy.shape == Shape({B_, C_}) && dy.contiguous(),
           "SequencePool: gradient {} does not match the output [{}, {}]", shape_str(dy.shape), B_, C_);
  const float* g = dy.f32();
  if (kind_ == PoolKind::max) {
    Tensor dx = arena.tensor({B_, T_, C_});
    backend_.masked_max_backward(g, arg_.data<int32_t>(), B_, T_, C_, dx.f32());
    return dx;
  }
  Tensor dx = arena.zeros({B_, T_, C_});
  for (int64_t b = 0; b < B_; ++b) {
    float* row = dx.f32() + b * T_ * C_;
    if (kind_ == PoolKind::mean)
      backend_.gemm(DType::f32, false, false, steps(b), C_, 1, 1.f / static_cast<float>(steps(b)), ones_.f32(), 1,
                    g + b * C_, C_, 0.f, row, C_);
    else
      backend_.copy(g + b * C_, row + (kind_ == PoolKind::last ? steps(b) - 1 : 0) * C_, static_cast<size_t>(C_));
  }
  return dx;
}

}  // namespace seqtrain
