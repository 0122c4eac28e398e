// NPY reader: NumPy .npy files (format versions 1.0, 2.0, 3.0), C order, little-endian
// numeric dtypes, memory-mapped read-only so a dataset larger than RAM costs only the pages
// a batch touches. Elements are converted to float one at a time as batches are filled.
//
// Refused with an Error naming the file and the byte offset in the header: a bad magic or
// version, a header that is not a Python dict literal with 'descr', 'fortran_order' and
// 'shape', Fortran order, big-endian data, dtypes other than bool/int/uint/float32/float64
// (object, complex, strings, float16, structured ...), and a data section shorter (truncated)
// or longer (trailing bytes) than the shape says.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"

namespace seqtrain {

enum class NpyDtype { Bool, I8, I16, I32, I64, U8, U16, U32, U64, F32, F64 };
const char* npy_dtype_name(NpyDtype d);  // numpy's spelling: "float32", "int8", "bool", ...

// A read-only memory mapping of a whole file; unmapped when the last owner goes.
// Pages a process reads through a mapping count in its resident set until unmapped, so an
// epoch over a 1 GB file would end with 1 GB resident. Readers report what they copied out
// (note_read); every kResidentBudget bytes the whole mapping is dropped from this process's
// page tables (madvise MADV_DONTNEED: the pages stay in the kernel's page cache, a later read
// maps them back without I/O), which bounds the file's share of the resident set.
struct MappedFile {
  static constexpr size_t kResidentBudget = size_t{4} << 20;
  const unsigned char* data = nullptr;
  size_t size = 0;
  std::atomic<size_t> read_since_drop{0};
  void note_read(size_t bytes);
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  // Maps `path`; throws Error naming the path when it cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
};

struct NpyArray {
  std::string path;
  int version_major = 1;           // 1, 2 or 3
  NpyDtype dtype = NpyDtype::F32;
  int64_t itemsize = 4;
  std::vector<int64_t> shape;      // () for a scalar
  int64_t count = 1;               // product of shape
  int64_t data_offset = 0;         // byte offset of element 0 in the file
  const unsigned char* data = nullptr;
  std::shared_ptr<MappedFile> map; // keeps `data` valid; copies share the mapping

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  float at(int64_t i) const;  // element i in C order, converted to float
  // Converts elements [first, first + n) to float into out (bounds checked).
  void read_floats(int64_t first, int64_t n, float* out) const;
  std::string shape_str() const;  // "(3, 4, 5)" like numpy
};

// Opens and validates a .npy file; the data stays on disk (mapped), nothing is read whole.
NpyArray open_npy(const std::string& path);

// Writes a C-order little-endian float32 array as a version 1.0 .npy file (header padded so
// the data starts on a 64-byte boundary, as numpy writes it), atomically: a temporary file
// renamed into place, so a failed write leaves no file behind.
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
// The bytes of a .npy file (version 1.0, C order) of float32 or int64 values, for a caller that
// writes several files only once all of them are made; `path` is for messages.
std::string npy_bytes_f32(const std::vector<int64_t>& shape, const float* data, const std::string& path);
std::string npy_bytes_i64(const std::vector<int64_t>& shape, const int64_t* data, const std::string& path);

// Samples from X of shape [N, T, F] (or [N, T], read as F = 1) and optional y of shape [N]
// (a label per sample, y_size 1), [N, H] or [N, H, targets] (y_size H * targets), each sample
// laid out C-order exactly as in the file. Throws Error naming both files when the sample
// counts differ. fill() is thread-safe (read-only mapping) and ignores the epoch. With lengths,
// the steps after a sample's length are padding (kept as the file has them).
class NpySource final : public BatchSource {
 public:
  NpySource(NpyArray x, std::optional<NpyArray> y = std::nullopt);
  // Opens X (and y when y_path is not empty).
  static NpySource open(const std::string& x_path, const std::string& y_path = "");

  int64_t size() const override { return n_; }
  int64_t x_size() const override { return steps_ * features_; }
  int64_t y_size() const override { return y_ ? y_stride_ : 0; }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;
  bool has_lengths() const override { return !lengths_.empty(); }
  void fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const override;

  // Variable length (data.npy.*_len): each sample's valid steps from an integer file of shape [N],
  // or (data.npy.pad_value) the steps before each sample's trailing run of steps whose every
  // feature equals `pad`. Error naming the file, the sample and the fix for a length outside
  // 1..steps, another N than X's, or a sample left empty.
  void read_lengths(const std::string& path);
  void lengths_from_padding(double pad);
  // Reads every sample once (after the lengths are known): fill() refuses a NaN or inf in a valid
  // step of X or in y, naming the file, sample, step and feature, and a training run wants that
  // before it writes anything rather than at the batch that holds it.
  void check_values() const;

  int64_t steps() const { return steps_; }
  int64_t features() const { return features_; }
  const NpyArray& x() const { return x_; }
  const std::optional<NpyArray>& y() const { return y_; }

 private:
  NpyArray x_;
  std::optional<NpyArray> y_;
  int64_t n_ = 0, steps_ = 0, features_ = 0, y_stride_ = 0;
  std::vector<int64_t> lengths_;  // [n_] when the samples have lengths, else empty
};

}  // namespace seqtrain
