// Token-id checks shared by the language models. See token_ids.h.
#include "models/token_ids.h"

#include <cmath>

namespace seqtrain {

Tensor token_ids(const Tensor& x, Arena& arena, const std::string& model_type, int64_t vocab) {
  const bool rank_ok = x.shape.size() == 2 || (x.shape.size() == 3 && x.shape[2] == 1);
  ST_CHECK(rank_ok && x.contiguous() && (x.dtype == DType::f32 || x.dtype == DType::i64),
           "{}: input must be contiguous [batch, T] token ids (f32 or int64), got {} {}", model_type,
           dtype_name(x.dtype), shape_str(x.shape));
  const int64_t B = x.shape[0], T = x.shape[1], n = B * T;
  Tensor ids = arena.tensor({B, T}, DType::i64);
  int64_t* id = ids.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const double v = x.dtype == DType::i64 ? static_cast<double>(x.data<int64_t>()[i]) : x.f32()[i];
    ST_CHECK(std::floor(v) == v, "{}: input at batch {} position {} is {}, not a token id (ids are whole numbers)",
             model_type, i / T, i % T, v);
    ST_CHECK(v >= 0 && v < static_cast<double>(vocab),
             "{}: token id {} at batch {} position {} is outside the vocabulary of {} ids (valid 0..{}); the data was "
             "encoded with a different vocabulary than the model's",
             model_type, v, i / T, i % T, vocab, vocab - 1);
    id[i] = static_cast<int64_t>(v);
  }
  return ids;
}

}  // namespace seqtrain
