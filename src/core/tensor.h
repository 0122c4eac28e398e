// Tensor: a non-owning view of typed memory with a shape and strides (in elements).
// Memory is owned elsewhere: the flat parameter/gradient buffers or the activation Arena.
// Views (slices, reshapes) are cheap copies of this struct; nothing here allocates.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace seqtrain {

using Shape = std::vector<int64_t>;

inline int64_t numel_of(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

inline std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) { st[i] = acc; acc *= s[i]; }
  return st;
}

struct Tensor {
  void* ptr = nullptr;
  Shape shape;
  Shape strides;
  DType dtype = DType::f32;
  Device device = Device::cpu;

  Tensor() = default;
  Tensor(void* p, Shape s, DType t = DType::f32, Device d = Device::cpu)
      : ptr(p), shape(std::move(s)), strides(contiguous_strides(shape)), dtype(t), device(d) {}

  int64_t numel() const { return numel_of(shape); }
  int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  bool contiguous() const { return strides == contiguous_strides(shape); }
  size_t nbytes() const { return numel() * dtype_size(dtype); }

  template <typename T = float> T* data() const { return static_cast<T*>(ptr); }
  float* f32() const {
    ST_CHECK(dtype == DType::f32, "tensor holds {}, expected f32", dtype_name(dtype));
    return static_cast<float*>(ptr);
  }

  // Same memory, new shape; only for contiguous tensors with the same element count.
  Tensor reshape(Shape s) const {
    ST_CHECK(contiguous(), "reshape needs a contiguous tensor");
    ST_CHECK(numel_of(s) == numel(), "cannot reshape {} to {}", shape_str(shape), shape_str(s));
    return Tensor(ptr, std::move(s), dtype, device);
  }
  // Rows [begin, end) along dimension 0.
  Tensor slice0(int64_t begin, int64_t end) const {
    ST_CHECK(begin >= 0 && begin <= end && end <= shape.at(0), "slice [{}, {}) out of {}", begin, end, shape_str(shape));
    Tensor t = *this;
    t.ptr = static_cast<char*>(ptr) + begin * strides[0] * dtype_size(dtype);
    t.shape[0] = end - begin;
    return t;
  }
};

}  // namespace seqtrain
