// Test fixtures for safetensors files: a NamedTensor built from typed values, and one tensor of
// every dtype and shape kind the format allows (used by the engine's round trip and by the
// Python cross-check, so both exercise the same cases).
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace seqtrain::testing {

template <typename T>
NamedTensor tensor_of(std::string name, StDType t, Shape shape, const std::vector<T>& values) {
  NamedTensor nt{std::move(name), t, std::move(shape), {}};
  nt.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(nt.bytes.data(), values.data(), nt.bytes.size());
  return nt;
}

// Every dtype (in the order tests/py/safetensors_roundtrip.py's EXPECTED lists them), a scalar and an empty tensor, with awkward values (subnormal, inf, extremes).
inline std::vector<NamedTensor> every_dtype_tensors() {
  return {
      tensor_of<double>("f64", StDType::F64, {2}, {1.0 / 3, -1e300}),
      tensor_of<float>("f32", StDType::F32, {2, 3}, {1, -2, 3.5f, 0, 1e-30f, -7}),
      tensor_of<uint16_t>("f16", StDType::F16, {3}, {0x3c00, 0x8001, 0x7c00}),
      tensor_of<uint16_t>("bf16", StDType::BF16, {2}, {0x3f80, 0xc040}),
      tensor_of<int64_t>("i64", StDType::I64, {2}, {-1, std::numeric_limits<int64_t>::max()}),
      tensor_of<int32_t>("i32", StDType::I32, {1}, {42}),
      tensor_of<int16_t>("i16", StDType::I16, {2}, {-3, 3}),
      tensor_of<int8_t>("i8", StDType::I8, {3}, {-128, 0, 127}),
      tensor_of<uint8_t>("u8", StDType::U8, {2}, {0, 255}),
      tensor_of<uint8_t>("bool", StDType::BOOL, {2}, {0, 1}),
      tensor_of<float>("scalar", StDType::F32, {}, {2.5f}),
      tensor_of<float>("empty", StDType::F32, {0, 4}, {}),
  };
}

}  // namespace seqtrain::testing
