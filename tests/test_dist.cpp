// Tests for what data-parallel training keys by the global batch (docs/DISTRIBUTED.md): a rank's
// shard of a batch draws, under nn/dropout.h's PassRows scope, exactly the dropout masks the
// whole batch draws for those rows (batch-major and time-major tensors, blocks crossed at an
// unaligned start, forward and backward), on the CPU backend and the reference one, and
// attention's masks by the global row. The ranks themselves run under mpirun in
// tests/py/mpi_check.py (ctest Mpi.*).
#include <algorithm>
#include <utility>
#include <vector>

#include "backend/attention_dropout.h"
#include "backend/reference/reference_backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/dropout.h"
#include "test_util.h"

namespace seqtrain {
namespace {

std::vector<float> ones_like(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  Rng rng(3);
  for (auto& x : v) x = 0.5f + rng.uniform();
  return v;
}

// y of a shard [rows lo, hi) of a tensor whose batch dimension is `bdim`, from the whole tensor's
// forward: the slice the shard must reproduce.
std::vector<float> slice(const std::vector<float>& full, const Shape& s, int bdim, int64_t lo, int64_t hi) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < bdim; ++d) outer *= s[d];
  for (size_t d = bdim + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = lo; r < hi; ++r)
      for (int64_t i = 0; i < inner; ++i) out.push_back(full[(o * s[bdim] + r) * inner + i]);
  return out;
}

void check_shards(Backend* backend, const Shape& shape, int bdim) {
  Arena arena;
  const int64_t n = numel_of(shape), B = shape[bdim];
  const std::vector<float> xf = ones_like(n);
  Tensor x = arena.tensor(shape);
  std::copy(xf.begin(), xf.end(), x.f32());
  Dropout whole(0.3f, backend);
  Tensor y = whole.forward(x, arena, true, 11, bdim);
  const std::vector<float> yf(y.f32(), y.f32() + n);
  Tensor dx = whole.backward(x, arena);  // dy = x: backward applies the same mask
  const std::vector<float> dxf(dx.f32(), dx.f32() + n);
  for (const auto& [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{{0, B / 2}, {B / 2, B}, {1, B - 1}}) {
    Shape ss = shape;
    ss[bdim] = hi - lo;
    const std::vector<float> xs = slice(xf, shape, bdim, lo, hi);
    Tensor xt = arena.tensor(ss);
    std::copy(xs.begin(), xs.end(), xt.f32());
    const PassRows rows(BatchRows{lo, B}, hi - lo);
    Dropout shard(0.3f, backend);
    Tensor ys = shard.forward(xt, arena, true, 11, bdim);
    EXPECT_EQ(std::vector<float>(ys.f32(), ys.f32() + xt.numel()), slice(yf, shape, bdim, lo, hi))
        << "rows [" << lo << ", " << hi << ") of " << B;
    Tensor dxs = shard.backward(xt, arena);
    EXPECT_EQ(std::vector<float>(dxs.f32(), dxs.f32() + xt.numel()), slice(dxf, shape, bdim, lo, hi));
  }
}

TEST(DataParallelMasks, DropoutShardDrawsTheWholeBatchMaskBatchMajor) {
  // 9 rows of 1000: a shard starts inside a 4096-element block of the mask.
  check_shards(nullptr, {9, 1000}, 0);
}

TEST(DataParallelMasks, DropoutShardDrawsTheWholeBatchMaskTimeMajor) {
  check_shards(nullptr, {7, 6, 333}, 1);  // an RNN's [T, B, H] between layers
}

TEST(DataParallelMasks, ReferenceBackendDrawsTheSameShards) {
  ReferenceBackend ref;
  check_shards(&ref, {7, 6, 333}, 1);
}

TEST(DataParallelMasks, OutsideAScopeOrForAnotherRowCountTheBatchIsWhole) {
  EXPECT_EQ(PassRows::of(4).total, 0);
  const PassRows rows(BatchRows{3, 8}, 4);
  EXPECT_EQ(PassRows::of(4).first, 3);
  EXPECT_EQ(PassRows::of(4).total, 8);
  EXPECT_EQ(PassRows::of(5).total, 0);  // a packed or reshaped tensor: not the shard's rows
}

}  // namespace
}  // namespace seqtrain
