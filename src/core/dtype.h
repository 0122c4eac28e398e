// DType and Device: the element types and places a Tensor's bytes can have.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace seqtrain {

enum class DType : uint8_t { f32, bf16, f16, f64, i64, i32, u8 };  // u8: masks
enum class Device : uint8_t { cpu, cuda };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::f64: case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

}  // namespace seqtrain
