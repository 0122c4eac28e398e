// Safetensors: reading and writing the weight-file format PyTorch users exchange
// (https://github.com/huggingface/safetensors). Layout: 8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}},
// then the tensor bytes, little-endian, C order, offsets relative to the end of the header.
//
// The reader enforces every rule of the format and names the file and tensor in each error,
// because a checkpoint that loads "mostly" is worse than one that refuses to load. The writer
// is atomic: it writes `path.tmp.<pid>`, fsyncs, renames over `path` and fsyncs the directory,
// so a crash leaves either the old file or the new one, never half of one.
//
// save_params()/load_params() map a ParamStore (named like the PyTorch state_dict) to a file
// whose tensors are all F32; save_flat()/load_flat() do the same for any buffer laid out like
// the parameters (optimizer moments), under a name prefix per buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "nn/params.h"

namespace seqtrain {

// The format's element types. Wider than core DType because a file may hold any of them.
enum class StDType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t st_dtype_size(StDType t);
std::string_view st_dtype_name(StDType t);          // "F32", ... as spelled in the header
std::optional<StDType> st_dtype_from_name(std::string_view name);

using Metadata = std::map<std::string, std::string>;

// One tensor that owns its bytes (as read from a file, or built to be written).
struct NamedTensor {
  std::string name;
  StDType dtype = StDType::F32;
  Shape shape;
  std::vector<std::byte> bytes;  // numel * st_dtype_size(dtype) bytes, little-endian, C order

  int64_t numel() const { return numel_of(shape); }
  static NamedTensor from_f32(std::string name, Shape shape, const float* data);
  // Values as f32; F64, F16 and BF16 are converted (F64 rounds to nearest), others refused.
  std::vector<float> to_f32() const;
};

// A tensor to be written, whose bytes are owned by the caller (no copy of big buffers).
struct TensorRef {
  std::string name;
  StDType dtype = StDType::F32;
  Shape shape;
  const void* data = nullptr;  // numel * st_dtype_size(dtype) bytes
};

struct SafetensorsFile {
  std::string path;
  std::vector<NamedTensor> tensors;  // in data-offset order
  Metadata metadata;

  const NamedTensor* find(const std::string& name) const;
  const NamedTensor& at(const std::string& name) const;  // throws Error naming file and tensor
};

void write_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                       const Metadata& metadata = {});
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const Metadata& metadata = {});
SafetensorsFile read_safetensors(const std::string& path);

// Every ParamEntry as an F32 tensor under its own name.
void save_params(const std::string& path, const ParamStore& store, const Metadata& metadata = {});
// The file must hold exactly the store's names with the same shapes; values are copied into
// the store's parameters (through its host-access contract, nn/params.h). F64/F16/BF16 tensors
// are converted to f32. Returns the file's metadata.
Metadata load_params(const std::string& path, ParamStore& store);

// Buffers laid out like store.params() (one float per parameter element), each written as one
// tensor per ParamEntry named prefix + entry.name, e.g. prefix "exp_avg." for AdamW's moments.
struct FlatBuffer {
  std::string prefix;
  const float* data = nullptr;
};
struct FlatBufferOut {
  std::string prefix;
  float* data = nullptr;
};
void save_flat(const std::string& path, const ParamStore& layout, std::span<const FlatBuffer> buffers,
               const Metadata& metadata = {});
// Requires exactly the names save_flat would write for these prefixes and the layout's shapes.
Metadata load_flat(const std::string& path, const ParamStore& layout, std::span<const FlatBufferOut> buffers);

}  // namespace seqtrain
