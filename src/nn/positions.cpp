// Positions: the learned and the sinusoidal tables and their lookup. See positions.h.
#include "nn/positions.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"

namespace seqtrain {

PositionKind position_kind(const std::string& word) {
  if (word == "learned") return PositionKind::learned;
  if (word == "sinusoidal") return PositionKind::sinusoidal;
  if (word == "none") return PositionKind::none;
  fail("model.positions '{}' is not known: use learned, sinusoidal or none", word);
}

namespace {
// Host values into a new buffer of the backend's memory (n floats' worth of bytes).
DeviceBuffer to_device(Backend& backend, const void* host, size_t floats) {
  DeviceBuffer buf(backend, floats, /*zero=*/false);
  if (backend.host_accessible()) std::memcpy(buf.data(), host, floats * sizeof(float));
  else buf.upload({static_cast<const float*>(host), floats});
  return buf;
}

DeviceBuffer sinusoid_table(Backend& backend, int64_t T, int64_t C) {
  std::vector<float> pe(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      const double w = std::pow(10000.0, -static_cast<double>(c - c % 2) / static_cast<double>(C));
      pe[static_cast<size_t>(t * C + c)] = static_cast<float>(c % 2 == 0 ? std::sin(t * w) : std::cos(t * w));
    }
  return to_device(backend, pe.data(), pe.size());
}
}  // namespace

Positions::Positions(ParamStore& params, const std::string& name, PositionKind kind, int64_t max_len, int64_t dim)
    : params_(params), kind_(kind), max_len_(max_len), dim_(dim) {
  if (kind == PositionKind::learned) learned_.emplace(params, name, max_len, dim);
  if (kind == PositionKind::sinusoidal) fixed_ = sinusoid_table(params.backend(), max_len, dim);
}

size_t Positions::weight() const {
  ST_CHECK(learned_.has_value(), "Positions: only a learned table has a weight");
  return learned_->weight;
}

void Positions::add(const Tensor& x, Arena& arena) {
  if (kind_ == PositionKind::none) return;
  ST_CHECK(x.shape.size() == 3 && x.dim(1) <= max_len_ && x.dim(2) == dim_ && x.contiguous(),
           "Positions: input {} must be a contiguous [B, T <= {}, {}]", shape_str(x.shape), max_len_, dim_);
  const int64_t B = x.dim(0), T = x.dim(1);
  if (ids_B_ < B || ids_T_ != T) {
    std::vector<int64_t> ids(static_cast<size_t>(B * T));
    for (int64_t i = 0; i < B * T; ++i) ids[static_cast<size_t>(i)] = i % T;
    ids_ = to_device(params_.backend(), ids.data(), 2 * ids.size());  // two floats per int64
    ids_B_ = B;
    ids_T_ = T;
  }
  const Tensor pos(ids_.data(), {B, T}, DType::i64);
  if (learned_) {
    learned_->forward_add(pos, x, arena, /*ids_checked=*/true);
    return;
  }
  const EmbeddingArgs a{.rows = max_len_, .dim = dim_, .count = B * T, .ids = pos.data<int64_t>(), .ids_checked = true};
  params_.backend().embedding_forward(a, fixed_.data(), x.f32(), /*accumulate=*/true);
}

void Positions::backward(const Tensor& dx, Arena& arena) {
  if (learned_) learned_->backward(dx, arena);
}

}  // namespace seqtrain
