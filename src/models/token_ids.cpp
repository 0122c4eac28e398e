// Token-id checks shared by the language models. See token_ids.h.
#include "models/token_ids.h"

#include <cmath>
#include <cstring>

#include "backend/seam_loops.h"

namespace seqtrain {
namespace {

// The value at element i of x, read back from the backend's memory (an error path only).
double value_at(Backend& backend, const Tensor& x, int64_t i) {
  const size_t size = dtype_size(x.dtype);
  const void* src = static_cast<const char*>(x.ptr) + i * size;
  int64_t i64 = 0;
  float f32 = 0;
  void* dst = x.dtype == DType::i64 ? static_cast<void*>(&i64) : static_cast<void*>(&f32);
  if (backend.host_accessible()) std::memcpy(dst, src, size);
  else backend.copy_to_host(src, dst, size);
  return x.dtype == DType::i64 ? static_cast<double>(i64) : f32;
}

// The error for the value v at flat position `bad` of a [B, T] batch.
[[noreturn]] void fail_bad_id(double v, int64_t bad, int64_t T, const std::string& model_type, int64_t vocab) {
  ST_CHECK(std::floor(v) == v, "{}: input at batch {} position {} is {}, not a token id (ids are whole numbers)",
           model_type, bad / T, bad % T, v);
  fail("{}: token id {} at batch {} position {} is outside the vocabulary of {} ids (valid 0..{}); the data was "
       "encoded with a different vocabulary than the model's",
       model_type, v, bad / T, bad % T, vocab, vocab - 1);
}

}  // namespace

// The host backends' own loop, as a check only: the same rule as every backend's op.
void check_token_ids(const Tensor& host_x, const std::string& model_type, int64_t vocab) {
  const int64_t n = host_x.numel();
  if (n == 0) return;
  const int64_t bad = token_ids_loop(host_x.dtype, host_x.ptr, nullptr, n, vocab);
  if (bad >= 0) fail_bad_id(value_at(backend_named("cpu"), host_x, bad), bad, host_x.shape[1], model_type, vocab);
}

Tensor token_ids(Backend& backend, const Tensor& x, Arena& arena, const std::string& model_type, int64_t vocab,
                 const Tensor* host_x) {
  const bool rank_ok = x.shape.size() == 2 || (x.shape.size() == 3 && x.shape[2] == 1);
  ST_CHECK(rank_ok && x.contiguous() && (x.dtype == DType::f32 || x.dtype == DType::i64),
           "{}: input must be contiguous [batch, T] token ids (f32 or int64), got {} {}", model_type,
           dtype_name(x.dtype), shape_str(x.shape));
  const int64_t B = x.shape[0], T = x.shape[1], n = B * T;
  Tensor ids = arena.tensor({B, T}, DType::i64);
  if (n == 0) return ids;
  if (host_x && host_x->ptr && host_x->numel() == n && host_x->dtype == x.dtype) {
    check_token_ids(*host_x, model_type, vocab);
    backend.token_ids_checked(x.dtype, x.ptr, ids.data<int64_t>(), n, vocab);
    return ids;
  }
  const int64_t bad = backend.token_ids(x.dtype, x.ptr, ids.data<int64_t>(), n, vocab);
  if (bad < 0) return ids;
  fail_bad_id(value_at(backend, x, bad), bad, T, model_type, vocab);
}

}  // namespace seqtrain
