// SequencePool forward/backward. See sequence_pool.h.
//   last / first  y[b] = x[b, t_b]                   dx[b, t_b] = dy[b]
//   mean          y[b] = (1/n_b) 1[1, n_b] x[b, :n_b]  dx[b, :n_b] = (1/n_b) 1[n_b, 1] dy[b]
//   max           the backend's masked_max op, which keeps the winning step per channel
// x's rows of sample b start at first_row(b): b * T padded, packing.start(b) packed.
#include <cstring>
#include <vector>

#include "nn/sequence_pool.h"
#include "core/trace.h"

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

const uint8_t* row_padding(std::span<const int64_t> lengths, int64_t B, int64_t T, int64_t per_row, int64_t lead,
                           std::string_view model, std::vector<int64_t>& valid, Arena& arena, Backend& backend) {
  valid.clear();
  if (lengths.empty()) return nullptr;
  ST_CHECK(static_cast<int64_t>(lengths.size()) == B, "{}: {} lengths for a batch of {}", model, lengths.size(), B);
  const int64_t N = T / per_row + lead;
  bool padded = false;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    ST_CHECK(len >= 1 && len <= T, "{}: sample {} has length {}; each needs 1 to {} steps", model, b, len, T);
    valid.push_back((len + per_row - 1) / per_row + lead);
    padded |= valid.back() < N;
  }
  if (!padded) {
    valid.clear();
    return nullptr;
  }
  return padding_mask(valid, N, arena, backend);
}

Tensor SequencePool::forward(const Tensor& x, std::span<const int64_t> valid, const uint8_t* mask, Arena& arena) {
  ST_TRACE("pool.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(x.shape.size() == 3 && x.contiguous(), "SequencePool: input {} must be a contiguous [B, T, C]",
           shape_str(x.shape));
  B_ = x.dim(0);
  T_ = x.dim(1);
  C_ = x.dim(2);
  ST_CHECK(valid.empty() || static_cast<int64_t>(valid.size()) == B_, "SequencePool: {} lengths for a batch of {}",
           valid.size(), B_);
  valid_.assign(valid.begin(), valid.end());
  packed_ = false;
  in_shape_ = x.shape;
  for (int64_t b = 0; b < B_; ++b)
    ST_CHECK(steps(b) >= 1 && steps(b) <= T_, "SequencePool: sample {} has {} valid steps; each needs 1 to {}", b,
             steps(b), T_);
  if (kind_ != PoolKind::max) return pool_rows(x, arena);
  Tensor y = arena.tensor({B_, C_});
  arg_ = arena.tensor({B_, C_}, DType::i32);
  backend_.masked_max_forward(x.f32(), valid.empty() ? nullptr : mask, B_, T_, C_, y.f32(), arg_.data<int32_t>());
  return y;
}

Tensor SequencePool::forward(const Tensor& x, const TokenPacking& packing, Arena& arena) {
  ST_TRACE("pool.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(x.shape.size() == 3 && x.dim(0) == 1 && x.dim(1) == packing.rows() && x.contiguous(),
           "SequencePool: packed input {} must be a contiguous [1, {}, C]", shape_str(x.shape), packing.rows());
  B_ = packing.batch();
  T_ = packing.seq();
  C_ = x.dim(2);
  valid_.assign(packing.valid().begin(), packing.valid().end());
  start_.clear();
  for (int64_t b = 0; b < B_; ++b) start_.push_back(packing.start(b));
  packed_ = true;
  in_shape_ = x.shape;
  if (kind_ != PoolKind::max) return pool_rows(x, arena);
  // Each sample's rows are a whole unpadded sequence: the op once per sample, without a mask.
  Tensor y = arena.tensor({B_, C_});
  arg_ = arena.tensor({B_, C_}, DType::i32);
  for (int64_t b = 0; b < B_; ++b)
    backend_.masked_max_forward(x.f32() + first_row(b) * C_, nullptr, 1, steps(b), C_, y.f32() + b * C_,
                                arg_.data<int32_t>() + b * C_);
  return y;
}

Tensor SequencePool::pool_rows(const Tensor& x, Arena& arena) {
  Tensor y = arena.tensor({B_, C_});
  const float* xp = x.f32();
  if (kind_ == PoolKind::mean) {
    ones_ = arena.tensor({T_});
    backend_.fill(ones_.f32(), static_cast<size_t>(T_), 1.f);
    for (int64_t b = 0; b < B_; ++b)
      backend_.gemm(DType::f32, false, false, 1, C_, steps(b), 1.f / static_cast<float>(steps(b)), ones_.f32(), T_,
                    xp + first_row(b) * C_, C_, 0.f, y.f32() + b * C_, C_);
    return y;
  }
  for (int64_t b = 0; b < B_; ++b) {
    const int64_t t = kind_ == PoolKind::last ? steps(b) - 1 : 0;
    backend_.copy(xp + (first_row(b) + t) * C_, y.f32() + b * C_, static_cast<size_t>(C_));
  }
  return y;
}

Tensor SequencePool::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("pool.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(dy.shape == Shape({B_, C_}) && dy.contiguous(),
           "SequencePool: gradient {} does not match the output [{}, {}]", shape_str(dy.shape), B_, C_);
  const float* g = dy.f32();
  if (kind_ == PoolKind::max) {
    Tensor dx = arena.tensor(in_shape_);
    if (!packed_) {
      backend_.masked_max_backward(g, arg_.data<int32_t>(), B_, T_, C_, dx.f32());
      return dx;
    }
    for (int64_t b = 0; b < B_; ++b)
      backend_.masked_max_backward(g + b * C_, arg_.data<int32_t>() + b * C_, 1, steps(b), C_,
                                   dx.f32() + first_row(b) * C_);
    return dx;
  }
  Tensor dx = arena.zeros(in_shape_);
  for (int64_t b = 0; b < B_; ++b) {
    float* row = dx.f32() + first_row(b) * C_;
    if (kind_ == PoolKind::mean)
      backend_.gemm(DType::f32, false, false, steps(b), C_, 1, 1.f / static_cast<float>(steps(b)), ones_.f32(), 1,
                    g + b * C_, C_, 0.f, row, C_);
    else
      backend_.copy(g + b * C_, row + (kind_ == PoolKind::last ? steps(b) - 1 : 0) * C_, static_cast<size_t>(C_));
  }
  return dx;
}

}  // namespace seqtrain
