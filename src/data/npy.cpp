// NPY reader. The header is a Python dict literal; a small hand parser (no Python eval,
// no regex) reads exactly the subset numpy writes and reports the byte offset of anything
// else. The file format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#include "data/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <numeric>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/finite.h"
#include "core/text.h"
#include "io/atomic_dir.h"

namespace seqtrain {

const char* npy_dtype_name(NpyDtype d) {
  switch (d) {
    case NpyDtype::Bool: return "bool";
    case NpyDtype::I8: return "int8";
    case NpyDtype::I16: return "int16";
    case NpyDtype::I32: return "int32";
    case NpyDtype::I64: return "int64";
    case NpyDtype::U8: return "uint8";
    case NpyDtype::U16: return "uint16";
    case NpyDtype::U32: return "uint32";
    case NpyDtype::U64: return "uint64";
    case NpyDtype::F32: return "float32";
    case NpyDtype::F64: return "float64";
  }
  return "?";
}

MappedFile::~MappedFile() {
  if (data != nullptr && size > 0) munmap(const_cast<unsigned char*>(data), size);
}

void MappedFile::note_read(size_t bytes) {
  if (read_since_drop.fetch_add(bytes, std::memory_order_relaxed) + bytes < kResidentBudget) return;
  // One reader wins the reset and drops the mapping; concurrent readers just fault pages back in.
  size_t seen = read_since_drop.load(std::memory_order_relaxed);
  if (seen >= kResidentBudget && read_since_drop.compare_exchange_strong(seen, 0) && data != nullptr)
    madvise(const_cast<unsigned char*>(data), size, MADV_DONTNEED);
}

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, "{}: cannot open: {} (check the path in the config)", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(e));
  }
  auto m = std::make_shared<MappedFile>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size > 0) {
    void* p = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    ST_CHECK(p != MAP_FAILED, "{}: cannot memory-map {} bytes: {}", path, m->size, std::strerror(e));
    m->data = static_cast<const unsigned char*>(p);
  } else {
    ::close(fd);
  }
  return m;
}

namespace {

// Cursor over the header text; `base` is the file offset of header[0] for messages.
struct HeaderParser {
  const std::string& path;
  std::string_view s;
  int64_t base;
  size_t i = 0;

  [[noreturn]] void bad(const std::string& what) const {
    fail("{}: corrupt .npy header at byte {}: {} (header: {}); re-save the array with numpy.save", path,
         base + static_cast<int64_t>(i), what, std::string(s.substr(0, 200)));
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool peek(char c) {
    ws();
    return i < s.size() && s[i] == c;
  }
  void expect(char c) {
    if (!peek(c)) bad(fmt::format("expected '{}'", c));
    ++i;
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad("expected a quoted string");
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) bad("unterminated string");
    return std::string(s.substr(start, i++ - start));
  }
  bool boolean() {
    ws();
    if (s.substr(i, 4) == "True") { i += 4; return true; }
    if (s.substr(i, 5) == "False") { i += 5; return false; }
    bad("expected True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!peek(')')) {
      ws();
      const size_t start = i;
      int64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("dimension too large");
        v = v * 10 + (s[i++] - '0');
      }
      if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix, written by old numpy
      if (i == start) bad("expected a non-negative integer dimension");
      dims.push_back(v);
      if (peek(',')) ++i;
      else if (!peek(')')) bad("expected ',' or ')' in the shape");
    }
    ++i;
    return dims;
  }
};

struct DtypeInfo { NpyDtype dtype; int64_t size; };

DtypeInfo parse_descr(const std::string& d, const std::string& path, int64_t at) {
  const auto refuse = [&](const std::string& why) {
    fail("{}: header byte {}: dtype '{}' {}; convert with X.astype(numpy.float32) and save again", path, at, d, why);
  };
  if (d.size() < 2) refuse("is not a supported numeric dtype");
  const char order = d[0], kind = d[1];
  // Kinds first: '|O' (objects) has no size digits at all.
  if (kind == 'O') refuse("holds Python objects, which cannot be memory-mapped");
  if (kind == 'c') refuse("is complex, which is not supported");
  if (kind == 'U' || kind == 'S' || kind == 'a' || kind == 'V') refuse("holds strings or raw bytes, not numbers");
  if (kind == 'M' || kind == 'm') refuse("holds dates or time deltas, not numbers");
  int64_t size = 0;
  if (d.size() < 3 || d.size() > 6) refuse("is not a supported numeric dtype");
  for (size_t k = 2; k < d.size(); ++k) {
    if (d[k] < '0' || d[k] > '9') refuse("is not a supported numeric dtype");
    size = size * 10 + (d[k] - '0');
  }
  if (order == '>' && size > 1) refuse("is big-endian, which is not supported");
  if (order != '<' && order != '|' && order != '=' && order != '>') refuse("has an unknown byte-order mark");
  if (kind == 'f' && size == 2) refuse("is float16, which is not supported");
  struct Row { char kind; int64_t size; NpyDtype dt; };
  static constexpr Row table[] = {
      {'b', 1, NpyDtype::Bool}, {'i', 1, NpyDtype::I8},   {'i', 2, NpyDtype::I16}, {'i', 4, NpyDtype::I32},
      {'i', 8, NpyDtype::I64},  {'u', 1, NpyDtype::U8},   {'u', 2, NpyDtype::U16}, {'u', 4, NpyDtype::U32},
      {'u', 8, NpyDtype::U64},  {'f', 4, NpyDtype::F32},  {'f', 8, NpyDtype::F64}};
  for (const Row& r : table)
    if (r.kind == kind && r.size == size) return {r.dt, size};
  fail("{}: header byte {}: dtype '{}' is not a supported numeric dtype (bool, int8..int64, uint8..uint64, "
       "float32, float64); convert with X.astype(numpy.float32) and save again", path, at, d);
}

template <typename T>
void convert(const unsigned char* p, int64_t n, float* out) {
  // memcpy per element: the data offset need not be aligned to sizeof(T).
  for (int64_t k = 0; k < n; ++k) {
    T v;
    std::memcpy(&v, p + k * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[k] = static_cast<float>(v);
  }
}

}  // namespace

NpyArray open_npy(const std::string& path) {
  NpyArray a;
  a.path = path;
  a.map = MappedFile::open(path);
  const unsigned char* p = a.map->data;
  const int64_t size = static_cast<int64_t>(a.map->size);
  ST_CHECK(size >= 10 && std::memcmp(p, "\x93NUMPY", 6) == 0,
           "{}: not a .npy file: byte 0 does not start with the magic \\x93NUMPY (is it .npz, .csv or text?)", path);
  a.version_major = p[6];
  ST_CHECK(a.version_major >= 1 && a.version_major <= 3,
           "{}: byte 6: .npy format version {}.{} is not supported (1.0, 2.0 and 3.0 are); re-save with numpy.save",
           path, static_cast<int>(p[6]), static_cast<int>(p[7]));
  const int64_t len_bytes = a.version_major == 1 ? 2 : 4;
  ST_CHECK(size >= 8 + len_bytes, "{}: truncated at byte 8: the header length is missing", path);
  const int64_t header_len = len_bytes == 2 ? (p[8] | (p[9] << 8))
                                            : (int64_t{p[8]} | int64_t{p[9]} << 8 | int64_t{p[10]} << 16 |
                                               int64_t{p[11]} << 24);
  const int64_t header_at = 8 + len_bytes;
  ST_CHECK(header_at + header_len <= size,
           "{}: truncated header: bytes {}..{} announced at byte 8, but the file has only {} bytes", path, header_at,
           header_at + header_len, size);
  const std::string header(reinterpret_cast<const char*>(p + header_at), static_cast<size_t>(header_len));

  HeaderParser hp{path, header, header_at};
  bool have_descr = false, have_order = false, have_shape = false;
  std::string descr;
  int64_t descr_at = 0;
  hp.expect('{');
  while (!hp.peek('}')) {
    const int64_t key_at = header_at + static_cast<int64_t>(hp.i);
    const std::string key = hp.str();
    hp.expect(':');
    if (key == "descr") {
      if (hp.peek('[')) hp.bad("structured dtypes (a list of fields) are not supported");
      descr_at = header_at + static_cast<int64_t>(hp.i);
      descr = hp.str();
      have_descr = true;
    } else if (key == "fortran_order") {
      const int64_t at = header_at + static_cast<int64_t>(hp.i);
      ST_CHECK(!hp.boolean(),
               "{}: header byte {}: the array is in Fortran order, which is not supported; save "
               "numpy.ascontiguousarray(X) instead", path, at);
      have_order = true;
    } else if (key == "shape") {
      a.shape = hp.tuple();
      have_shape = true;
    } else {
      fail("{}: corrupt .npy header at byte {}: unknown key '{}'", path, key_at, key);
    }
    if (hp.peek(',')) ++hp.i;
    else if (!hp.peek('}')) hp.bad("expected ',' or '}'");
  }
  ST_CHECK(have_descr && have_order && have_shape,
           "{}: corrupt .npy header at byte {}: missing key '{}'", path, header_at,
           !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
  const DtypeInfo di = parse_descr(descr, path, descr_at);
  a.dtype = di.dtype;
  a.itemsize = di.size;
  a.count = 1;
  for (int64_t d : a.shape) {
    ST_CHECK(d == 0 || a.count <= std::numeric_limits<int64_t>::max() / d / a.itemsize,
             "{}: header: shape {} is too large", path, a.shape_str());
    a.count *= d;
  }
  a.data_offset = header_at + header_len;
  const int64_t need = a.count * a.itemsize;
  const int64_t have = size - a.data_offset;
  ST_CHECK(have >= need,
           "{}: truncated data: shape {} of {} needs {} bytes from byte {}, but only {} are there (the file was cut "
           "short; copy or save it again)", path, a.shape_str(), npy_dtype_name(a.dtype), need, a.data_offset, have);
  ST_CHECK(have == need,
           "{}: {} unexpected bytes after the data, which ends at byte {} (shape {}); the header does not match the "
           "data", path, have - need, a.data_offset + need, a.shape_str());
  a.data = p + a.data_offset;
  return a;
}

std::string NpyArray::shape_str() const {
  std::string s = "(";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void NpyArray::read_floats(int64_t first, int64_t n, float* out) const {
  ST_CHECK(first >= 0 && n >= 0 && first + n <= count, "{}: elements [{}, {}) outside its {} elements", path, first,
           first + n, count);
  if (n == 0) return;  // an empty array may have no data pointer at all
  const unsigned char* src = data + first * itemsize;
  switch (dtype) {
    case NpyDtype::Bool: for (int64_t k = 0; k < n; ++k) out[k] = src[k] != 0 ? 1.f : 0.f; break;
    case NpyDtype::I8: convert<int8_t>(src, n, out); break;
    case NpyDtype::I16: convert<int16_t>(src, n, out); break;
    case NpyDtype::I32: convert<int32_t>(src, n, out); break;
    case NpyDtype::I64: convert<int64_t>(src, n, out); break;
    case NpyDtype::U8: convert<uint8_t>(src, n, out); break;
    case NpyDtype::U16: convert<uint16_t>(src, n, out); break;
    case NpyDtype::U32: convert<uint32_t>(src, n, out); break;
    case NpyDtype::U64: convert<uint64_t>(src, n, out); break;
    case NpyDtype::F32: std::memcpy(out, src, static_cast<size_t>(n) * 4); break;
    case NpyDtype::F64: convert<double>(src, n, out); break;
  }
  if (map) map->note_read(static_cast<size_t>(n * itemsize));
}

float NpyArray::at(int64_t i) const {
  float v;
  read_floats(i, 1, &v);
  return v;
}

NpySource::NpySource(NpyArray x, std::optional<NpyArray> y) : x_(std::move(x)), y_(std::move(y)) {
  ST_CHECK(x_.ndim() == 2 || x_.ndim() == 3,
           "{}: X must have shape [N, T, F] (or [N, T]), got {}; reshape it with X.reshape(N, T, F)", x_.path,
           x_.shape_str());
  n_ = x_.shape[0];
  steps_ = x_.shape[1];
  features_ = x_.ndim() == 3 ? x_.shape[2] : 1;
  ST_CHECK(n_ > 0 && steps_ > 0 && features_ > 0, "{}: X has shape {}, with no samples or an empty axis", x_.path,
           x_.shape_str());
  if (y_) {
    ST_CHECK(y_->ndim() >= 1 && y_->ndim() <= 3,
             "{}: y must have shape [N] (labels) or [N, H, targets], got {}", y_->path, y_->shape_str());
    ST_CHECK(y_->shape[0] == n_, "shape mismatch: {} has {} samples (shape {}) but {} has {} (shape {}); X and y "
             "must have the same first dimension", x_.path, n_, x_.shape_str(), y_->path, y_->shape[0],
             y_->shape_str());
    y_stride_ = 1;
    for (int64_t k = 1; k < y_->ndim(); ++k) y_stride_ *= y_->shape[k];
    ST_CHECK(y_stride_ > 0, "{}: y has an empty axis (shape {})", y_->path, y_->shape_str());
  }
}

NpySource NpySource::open(const std::string& x_path, const std::string& y_path) {
  NpyArray x = open_npy(x_path);
  if (y_path.empty()) return NpySource(std::move(x));
  return NpySource(std::move(x), open_npy(y_path));
}

namespace {
// NaN or inf reaches every output and gradient it touches, so no model trains on it.
constexpr const char* kNonFiniteFix =
    "a model cannot train on it: replace the missing values (e.g. np.nan_to_num, or interpolate along the steps) "
    "or drop the sample";
}  // namespace

void NpySource::fill(std::span<const int64_t> idx, int64_t, float* x, float* y) const {
  const int64_t xs = x_size();
  for (size_t b = 0; b < idx.size(); ++b) {
    const int64_t i = idx[b];
    ST_CHECK(0 <= i && i < n_, "{}: sample {} out of range: the file has {} samples", x_.path, i, n_);
    if (x) {
      float* row = x + static_cast<int64_t>(b) * xs;
      x_.read_floats(i * xs, xs, row);
      // Steps past a sample's length are padding, which the model never reads: any value may fill them.
      const int64_t valid = lengths_.empty() ? steps_ : lengths_[static_cast<size_t>(i)];
      if (const int64_t k = first_non_finite(row, valid * features_); k >= 0)
        fail("{}: sample {} holds {} at step {}, feature {} (X of shape {}); {}", x_.path, i, value_text(row[k]),
             k / features_, k % features_, x_.shape_str(), kNonFiniteFix);
    }
    if (y && y_) {
      float* row = y + static_cast<int64_t>(b) * y_stride_;
      y_->read_floats(i * y_stride_, y_stride_, row);
      if (const int64_t k = first_non_finite(row, y_stride_); k >= 0)
        fail("{}: sample {} holds {} at element {} of its target (y of shape {}); {}", y_->path, i,
             value_text(row[k]), k, y_->shape_str(), kNonFiniteFix);
    }
  }
}

void NpySource::check_values() const {
  constexpr int64_t kChunk = 256;
  const int64_t rows = std::min(kChunk, n_);
  std::vector<float> x(static_cast<size_t>(rows * x_size())), y(static_cast<size_t>(rows * y_size()));
  std::vector<int64_t> idx;
  for (int64_t i0 = 0; i0 < n_; i0 += kChunk) {
    idx.resize(static_cast<size_t>(std::min(kChunk, n_ - i0)));
    std::iota(idx.begin(), idx.end(), i0);
    fill(idx, 0, x.data(), y_ ? y.data() : nullptr);
  }
}

void NpySource::fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const {
  ST_CHECK(!lengths_.empty(), "internal error: {} has no sample lengths", x_.path);
  for (size_t b = 0; b < idx.size(); ++b) {
    ST_CHECK(0 <= idx[b] && idx[b] < n_, "{}: sample {} out of range: the file has {} samples", x_.path, idx[b], n_);
    lengths[b] = lengths_[static_cast<size_t>(idx[b])];
  }
}

void NpySource::read_lengths(const std::string& path) {
  const NpyArray l = open_npy(path);
  ST_CHECK(l.ndim() == 1 && l.shape[0] == n_,
           "{}: sample lengths must have shape [N] = ({},) to match {} (X {}), got {}; save one length per sample "
           "of X", path, n_, x_.path, x_.shape_str(), l.shape_str());
  std::vector<float> v(static_cast<size_t>(n_));
  l.read_floats(0, n_, v.data());
  lengths_.resize(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) {
    const float f = v[static_cast<size_t>(i)];
    ST_CHECK(std::floor(f) == f && f >= 1 && f <= static_cast<float>(steps_),
             "{}: length {} of sample {} is not a whole number of steps between 1 and {} (X {} has T = {}); a "
             "sample needs at least one valid step and at most T", path, f, i, steps_, x_.path, steps_);
    lengths_[static_cast<size_t>(i)] = static_cast<int64_t>(f);
  }
}

void NpySource::lengths_from_padding(double pad) {
  const int64_t xs = x_size();
  std::vector<float> row(static_cast<size_t>(xs));
  const float p = static_cast<float>(pad);
  lengths_.resize(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) {
    x_.read_floats(i * xs, xs, row.data());
    int64_t len = steps_;
    while (len > 0 && std::all_of(row.begin() + (len - 1) * features_, row.begin() + len * features_,
                                  [p](float v) { return v == p; }))
      --len;
    ST_CHECK(len > 0, "{}: every step of sample {} equals data.npy.pad_value {}, which leaves it empty; drop the "
             "sample or choose a pad_value no real step has", x_.path, i, pad);
    lengths_[static_cast<size_t>(i)] = len;
  }
}

std::string npy_bytes(const std::vector<int64_t>& shape, const char* descr, const void* data, size_t elem_size,
                      const std::string& path) {
  std::string dims;
  int64_t count = 1;
  for (int64_t d : shape) {
    ST_CHECK(d >= 0, "writing {}: negative dimension {}", path, d);
    dims += std::to_string(d) + ", ";
    count *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // numpy writes (3,) but (3, 4)
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // magic (6) + version (2) + header length (2) + header, padded with spaces, ending in '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  ST_CHECK(header.size() <= 65535, "writing {}: shape too long for a version 1.0 header", path);
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char*>(data), static_cast<size_t>(count) * elem_size);
  return bytes;
}

std::string npy_bytes_f32(const std::vector<int64_t>& shape, const float* data, const std::string& path) {
  return npy_bytes(shape, "<f4", data, sizeof(float), path);
}

std::string npy_bytes_i64(const std::vector<int64_t>& shape, const int64_t* data, const std::string& path) {
  return npy_bytes(shape, "<i8", data, sizeof(int64_t), path);
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  write_file_atomic(path, npy_bytes_f32(shape, data, path));
}

}  // namespace seqtrain
