// Safetensors reader and atomic writer; see safetensors.h for the format and the guarantees.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace seqtrain {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; a big-endian host would need byte swaps");

namespace {

using json = nlohmann::json;

// The format caps the header so a corrupt length cannot make a reader allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeInfo { StDType t; const char* name; size_t size; };
constexpr DTypeInfo kDTypes[] = {
    {StDType::F64, "F64", 8}, {StDType::F32, "F32", 4}, {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I64, "I64", 8}, {StDType::I32, "I32", 4},
    {StDType::I16, "I16", 2}, {StDType::I8, "I8", 1}, {StDType::U8, "U8", 1},
    {StDType::BOOL, "BOOL", 1},
};

std::string errno_str() { return std::strerror(errno); }

// numel * elem_size, or nullopt when it does not fit in int64 (a corrupt or hostile shape).
std::optional<uint64_t> checked_nbytes(const Shape& shape, size_t elem_size) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t n = elem_size;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    uint64_t ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > kMax / ud) return std::nullopt;
    n *= ud;
  }
  return n;
}

// IEEE binary16 to binary32, exact for every input (subnormals, infinities and NaN included).
float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal: mant * 2^-24
    return sign ? -v : v;
  }
  uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                            : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  return std::bit_cast<float>(bits);
}

// Closes a descriptor on every path out of a function.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { if (fd >= 0) ::close(fd); }
  // close() reports deferred write errors (NFS, full disk), so the writer checks it.
  int release_close() { int f = fd; fd = -1; return ::close(f); }
};

void read_exact(int fd, void* dst, size_t n, uint64_t offset, const std::string& path, const char* what) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("{}: reading {} failed: {}", path, what, errno_str());
    if (r == 0) fail("{}: file ended while reading {}; the file was truncated while being read", path, what);
    p += r; n -= static_cast<size_t>(r); offset += static_cast<uint64_t>(r);
  }
}

// Writes through a small buffer so many little tensors do not cost one syscall each.
class BufferedWriter {
 public:
  BufferedWriter(int fd, const std::string& path) : fd_(fd), path_(path) { buf_.reserve(kCap); }
  void put(const void* data, size_t n) {
    if (buf_.size() + n > kCap) flush();
    if (n >= kCap) { write_all(data, n); return; }
    auto* p = static_cast<const char*>(data);
    buf_.insert(buf_.end(), p, p + n);
  }
  void flush() { write_all(buf_.data(), buf_.size()); buf_.clear(); }

 private:
  static constexpr size_t kCap = size_t{1} << 20;
  void write_all(const void* data, size_t n) {
    auto* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) fail("{}: write failed: {} (is the disk full?)", path_, errno_str());
      p += w; n -= static_cast<size_t>(w);
    }
  }
  int fd_;
  const std::string& path_;
  std::vector<char> buf_;
};

// Removes the temporary file unless the rename succeeded.
struct TmpFileGuard {
  std::string tmp;
  bool armed = true;
  ~TmpFileGuard() { if (armed) ::unlink(tmp.c_str()); }
};

void fsync_parent_dir(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // Some filesystems refuse fsync on directories; the rename itself has already happened.
  if (d.fd >= 0 && ::fsync(d.fd) != 0 && errno != EINVAL && errno != EROFS)
    fail("{}: fsync of directory {} failed: {}", path, dir.string(), errno_str());
}

std::string list_names(const std::vector<std::string>& names, size_t max_shown = 24) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max_shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > max_shown) out += fmt::format(", ... ({} more)", names.size() - max_shown);
  return out;
}

// Duplicate keys are legal JSON that nlohmann silently merges (last one wins), but in a
// safetensors header they mean two tensors claim one name; the parser callback sees every key.
struct DuplicateKeyFinder {
  struct Level { std::set<std::string> keys; std::string last_key; };
  std::vector<Level> stack;
  std::optional<std::string> message;

  bool on_event(int /*depth*/, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start: stack.emplace_back(); break;
      case json::parse_event_t::object_end: if (!stack.empty()) stack.pop_back(); break;
      case json::parse_event_t::key: {
        if (stack.empty() || message) break;
        std::string key = parsed.get<std::string>();
        if (!stack.back().keys.insert(key).second) {
          if (stack.size() == 1)
            message = fmt::format("tensor name '{}' appears twice in the header; each name must be unique", key);
          else
            message = fmt::format("key '{}' appears twice inside the header entry '{}'", key,
                                  stack[stack.size() - 2].last_key);
        }
        stack.back().last_key = std::move(key);
        break;
      }
      default: break;
    }
    return true;
  }
};

struct HeaderEntry {
  std::string name;
  StDType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Checks one tensor's header entry against the format rules; data_size is the byte count after
// the header, which bounds every offset and every shape.
HeaderEntry parse_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_size) {
  ST_CHECK(v.is_object(), "{}: header entry for tensor '{}' is {}, expected an object with dtype, shape and "
           "data_offsets", path, name, v.type_name());
  HeaderEntry e{name, StDType::F32, {}, 0, 0};

  auto dt = v.find("dtype");
  ST_CHECK(dt != v.end(), "{}: tensor '{}' has no \"dtype\" in the header", path, name);
  ST_CHECK(dt->is_string(), "{}: tensor '{}' has a non-string \"dtype\" ({})", path, name, dt->dump());
  auto t = st_dtype_from_name(dt->get<std::string>());
  ST_CHECK(t.has_value(), "{}: tensor '{}' has unknown dtype \"{}\"; known: F64, F32, F16, BF16, I64, I32, "
           "I16, I8, U8, BOOL", path, name, dt->get<std::string>());
  e.dtype = *t;

  auto sh = v.find("shape");
  ST_CHECK(sh != v.end(), "{}: tensor '{}' has no \"shape\" in the header", path, name);
  ST_CHECK(sh->is_array(), "{}: tensor '{}' has \"shape\" {}, expected a list of non-negative integers",
           path, name, sh->dump());
  for (const auto& d : *sh) {
    bool ok = d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0);
    ST_CHECK(ok, "{}: tensor '{}' has \"shape\" {}; every dimension must be a non-negative integer",
             path, name, sh->dump());
    ST_CHECK(d.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
             "{}: tensor '{}' has an absurd dimension in \"shape\" {}", path, name, sh->dump());
    e.shape.push_back(d.get<int64_t>());
  }
  auto nbytes = checked_nbytes(e.shape, st_dtype_size(e.dtype));
  ST_CHECK(nbytes.has_value(), "{}: tensor '{}' has \"shape\" {} whose element count overflows; the header is "
           "corrupt", path, name, sh->dump());
  ST_CHECK(*nbytes <= data_size, "{}: tensor '{}' has \"shape\" {} ({} bytes as {}) but the file holds only {} "
           "bytes of tensor data; the header is corrupt or the file truncated", path, name, sh->dump(), *nbytes,
           st_dtype_name(e.dtype), data_size);

  auto off = v.find("data_offsets");
  ST_CHECK(off != v.end(), "{}: tensor '{}' has no \"data_offsets\" in the header", path, name);
  bool ok = off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() && (*off)[1].is_number_unsigned();
  ST_CHECK(ok, "{}: tensor '{}' has \"data_offsets\" {}, expected [begin, end] with non-negative integers",
           path, name, off->dump());
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  ST_CHECK(e.begin <= e.end, "{}: tensor '{}' has \"data_offsets\" [{}, {}] with begin after end", path, name,
           e.begin, e.end);
  ST_CHECK(e.end - e.begin == *nbytes, "{}: tensor '{}' has \"data_offsets\" [{}, {}] ({} bytes) but shape {} "
           "of {} needs {} bytes", path, name, e.begin, e.end, e.end - e.begin, shape_str(e.shape),
           st_dtype_name(e.dtype), *nbytes);
  ST_CHECK(e.end <= data_size, "{}: tensor '{}' has \"data_offsets\" [{}, {}] past the end of the data ({} "
           "bytes); the file is truncated", path, name, e.begin, e.end, data_size);
  return e;
}

Metadata parse_metadata(const std::string& path, const json& v) {
  ST_CHECK(v.is_object(), "{}: \"__metadata__\" is {}, expected an object of string values", path, v.type_name());
  Metadata m;
  for (const auto& [k, val] : v.items()) {
    ST_CHECK(val.is_string(), "{}: \"__metadata__\" key '{}' holds {}; metadata values must be strings", path, k,
             val.dump());
    m[k] = val.get<std::string>();
  }
  return m;
}

// Gaps would hide bytes no tensor owns, overlaps would let two tensors alias; both mean the
// writer was broken, so the reader refuses rather than guessing.
void check_layout(const std::string& path, std::vector<HeaderEntry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const HeaderEntry* prev = nullptr;
  for (const auto& e : entries) {
    if (e.begin > expected)
      fail("{}: bytes [{}, {}) of the data belong to no tensor (gap before tensor '{}'); the data must be "
           "contiguous", path, expected, e.begin, e.name);
    if (e.begin < expected)
      fail("{}: tensor '{}' at [{}, {}] overlaps tensor '{}' at [{}, {}]", path, e.name, e.begin, e.end,
           prev->name, prev->begin, prev->end);
    expected = e.end;
    prev = &e;
  }
  ST_CHECK(expected == data_size, "{}: the file has {} bytes after the last tensor's data; expected size is 8 + "
           "header + {} data bytes", path, data_size - expected, expected);
}

}  // namespace

size_t st_dtype_size(StDType t) {
  for (const auto& d : kDTypes) if (d.t == t) return d.size;
  return 0;
}

std::string_view st_dtype_name(StDType t) {
  for (const auto& d : kDTypes) if (d.t == t) return d.name;
  return "?";
}

std::optional<StDType> st_dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes) if (name == d.name) return d.t;
  return std::nullopt;
}

NamedTensor NamedTensor::from_f32(std::string name, Shape shape, const float* data) {
  NamedTensor t{std::move(name), StDType::F32, std::move(shape), {}};
  t.bytes.resize(static_cast<size_t>(t.numel()) * sizeof(float));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

std::vector<float> NamedTensor::to_f32() const {
  size_t n = static_cast<size_t>(numel());
  std::vector<float> out(n);
  const std::byte* src = bytes.data();
  switch (dtype) {
    case StDType::F32:
      if (n) std::memcpy(out.data(), src, n * 4);
      break;
    case StDType::F64:
      for (size_t i = 0; i < n; ++i) { double d; std::memcpy(&d, src + 8 * i, 8); out[i] = static_cast<float>(d); }
      break;
    case StDType::F16:
      for (size_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); out[i] = f16_to_f32(h); }
      break;
    case StDType::BF16:  // bf16 is the top half of an f32, so widening is exact
      for (size_t i = 0; i < n; ++i) {
        uint16_t h; std::memcpy(&h, src + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      break;
    default:
      fail("tensor '{}' holds {}, which is not a floating-point type; expected F32 (or F64/F16/BF16)", name,
           st_dtype_name(dtype));
  }
  return out;
}

const NamedTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors) if (t.name == name) return &t;
  return nullptr;
}

const NamedTensor& SafetensorsFile::at(const std::string& name) const {
  const NamedTensor* t = find(name);
  if (!t) fail("{}: has no tensor '{}'", path, name);
  return *t;
}

void write_safetensors(const std::string& path, std::span<const TensorRef> tensors, const Metadata& metadata) {
  // nlohmann::ordered_json keeps the header in data order, which makes files easy to inspect.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::unordered_set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    ST_CHECK(t.name != kMetadataKey, "{}: '{}' is reserved for metadata and cannot name a tensor", path, t.name);
    ST_CHECK(seen.insert(t.name).second, "{}: tensor '{}' given twice; names must be unique", path, t.name);
    auto nbytes = checked_nbytes(t.shape, st_dtype_size(t.dtype));
    ST_CHECK(nbytes.has_value(), "{}: tensor '{}' has invalid shape {}", path, t.name, shape_str(t.shape));
    ST_CHECK(t.data != nullptr || *nbytes == 0, "{}: tensor '{}' has no data", path, t.name);
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + *nbytes}}};
    offset += *nbytes;
  }
  std::string text = header.dump();
  // Pad with spaces (allowed by the format) so the data starts 8-byte aligned, as PyTorch's
  // safetensors does; readers that mmap the file can then view f64/i64 tensors in place.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');

  TmpFileGuard guard{path + ".tmp." + std::to_string(::getpid())};
  Fd fd(::open(guard.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.fd < 0) {
    guard.armed = false;  // nothing was created, and the name might belong to someone else
    fail("{}: cannot create temporary file {}: {} (does the directory exist and is it writable?)", path,
         guard.tmp, errno_str());
  }
  BufferedWriter w(fd.fd, guard.tmp);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  w.put(len, 8);
  w.put(text.data(), text.size());
  for (const auto& t : tensors)
    w.put(t.data, static_cast<size_t>(numel_of(t.shape)) * st_dtype_size(t.dtype));
  w.flush();
  if (::fsync(fd.fd) != 0) fail("{}: fsync of {} failed: {}", path, guard.tmp, errno_str());
  if (fd.release_close() != 0) fail("{}: closing {} failed: {}", path, guard.tmp, errno_str());
  if (::rename(guard.tmp.c_str(), path.c_str()) != 0)
    fail("{}: cannot rename {} into place: {}", path, guard.tmp, errno_str());
  guard.armed = false;
  fsync_parent_dir(path);
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, const Metadata& metadata) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const auto& t : tensors) {
    auto nbytes = checked_nbytes(t.shape, st_dtype_size(t.dtype));
    ST_CHECK(nbytes && *nbytes == t.bytes.size(), "{}: tensor '{}' has {} bytes but shape {} of {} needs {}", path,
             t.name, t.bytes.size(), shape_str(t.shape), st_dtype_name(t.dtype), nbytes.value_or(0));
    refs.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
  }
  write_safetensors(path, std::span<const TensorRef>(refs), metadata);
}

SafetensorsFile read_safetensors(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) fail("{}: cannot open: {}", path, errno_str());
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail("{}: cannot stat: {}", path, errno_str());
  ST_CHECK(S_ISREG(st.st_mode), "{}: is not a regular file", path);
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  ST_CHECK(file_size >= 8, "{}: file is {} bytes, shorter than the 8-byte header length every safetensors file "
           "starts with; the file is truncated or not a safetensors file", path, file_size);

  uint8_t len[8];
  read_exact(fd.fd, len, 8, 0, path, "the header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  ST_CHECK(n <= kMaxHeaderBytes, "{}: header length {} exceeds the format's limit of {} bytes; the file is "
           "corrupt or not a safetensors file", path, n, kMaxHeaderBytes);
  ST_CHECK(n <= file_size - 8, "{}: header length {} is larger than the {} bytes after it; the file is truncated "
           "or not a safetensors file", path, n, file_size - 8);
  std::string text(n, '\0');
  read_exact(fd.fd, text.data(), n, 8, path, "the header");
  ST_CHECK(n > 0 && text[0] == '{', "{}: header does not start with '{{'; the file is not a safetensors file",
           path);

  DuplicateKeyFinder dups;
  json header;
  try {
    header = json::parse(text, [&](int depth, json::parse_event_t ev, json& parsed) {
      return dups.on_event(depth, ev, parsed);
    });
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (dups.message) fail("{}: {}", path, *dups.message);
  ST_CHECK(header.is_object(), "{}: header is {}, expected a JSON object", path, header.type_name());

  uint64_t data_size = file_size - 8 - n;
  SafetensorsFile out;
  out.path = path;
  std::vector<HeaderEntry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == kMetadataKey) out.metadata = parse_metadata(path, v);
    else entries.push_back(parse_entry(path, name, v, data_size));
  }
  check_layout(path, entries, data_size);

  out.tensors.reserve(entries.size());
  for (auto& e : entries) {
    NamedTensor t{e.name, e.dtype, std::move(e.shape), {}};
    t.bytes.resize(e.end - e.begin);
    std::string what = fmt::format("tensor '{}'", e.name);
    if (!t.bytes.empty()) read_exact(fd.fd, t.bytes.data(), t.bytes.size(), 8 + n + e.begin, path, what.c_str());
    out.tensors.push_back(std::move(t));
  }
  return out;
}

// A tied weight's second name (ParamStore::add_alias) may be in the parameter file (prefix "")
// and is then expected; its values must equal its entry's, or the two copies disagree about
// what the model is. Checked before anything is copied.
static void check_aliases(const std::string& path, const ParamStore& layout, std::span<const FlatBufferOut> buffers,
                   const std::unordered_map<std::string, const NamedTensor*>& by_name,
                   std::unordered_set<std::string>& expected_set) {
  for (const auto& b : buffers) {
    if (!b.prefix.empty()) continue;
    for (const auto& [name, i] : layout.aliases()) {
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      expected_set.insert(name);
      const ParamEntry& e = layout.entries()[i];
      auto own = by_name.find(e.name);
      if (own == by_name.end()) continue;  // reported as missing
      ST_CHECK(it->second->shape == e.shape && it->second->to_f32() == own->second->to_f32(),
               "{}: tensor '{}' is tied to '{}' (the same weight) but holds different values; save the model from "
               "one module so both names hold one tensor, or drop '{}' from the file", path, name, e.name, name);
    }
  }
}

void save_flat(const std::string& path, const ParamStore& layout, std::span<const FlatBuffer> buffers,
               const Metadata& metadata) {
  ST_CHECK(layout.finalized(), "{}: cannot save parameters before the model is built (ParamStore::finalize)", path);
  std::vector<TensorRef> refs;
  for (const auto& b : buffers)
    for (const auto& e : layout.entries())
      refs.push_back({b.prefix + e.name, StDType::F32, e.shape, b.data + e.offset});
  write_safetensors(path, std::span<const TensorRef>(refs), metadata);
}

Metadata load_flat(const std::string& path, const ParamStore& layout, std::span<const FlatBufferOut> buffers) {
  ST_CHECK(layout.finalized(), "{}: cannot load parameters before the model is built (ParamStore::finalize)", path);
  SafetensorsFile file = read_safetensors(path);

  std::unordered_map<std::string, const NamedTensor*> by_name;
  for (const auto& t : file.tensors) by_name[t.name] = &t;
  std::vector<std::string> expected, missing;
  std::unordered_set<std::string> expected_set;
  for (const auto& b : buffers)
    for (const auto& e : layout.entries()) {
      expected.push_back(b.prefix + e.name);
      expected_set.insert(expected.back());
      if (!by_name.count(expected.back())) missing.push_back(expected.back());
    }
  if (!missing.empty())
    fail("{}: tensor '{}' is missing{}; the file holds {} tensors and the model needs {}. Was it written for a "
         "different model?", path, missing[0],
         missing.size() > 1 ? fmt::format(" (also missing: {})",
                                          list_names({missing.begin() + 1, missing.end()})) : std::string(),
         file.tensors.size(), expected.size());
  check_aliases(path, layout, buffers, by_name, expected_set);
  for (const auto& t : file.tensors)
    if (!expected_set.count(t.name))
      fail("{}: unexpected tensor '{}', which the model does not have; expected exactly: {}", path, t.name,
           list_names(expected));

  // Check every tensor before copying any, so a refused file leaves the buffers untouched.
  for (const auto& b : buffers)
    for (const auto& e : layout.entries()) {
      const NamedTensor& t = *by_name.at(b.prefix + e.name);
      ST_CHECK(t.shape == e.shape, "{}: tensor '{}' has shape {} in the file but the model expects {}; the "
               "checkpoint was written for a different model configuration (check input_size, hidden, layers, "
               "bidirectional, output_size)", path, t.name, shape_str(t.shape), shape_str(e.shape));
      bool floating = t.dtype == StDType::F32 || t.dtype == StDType::F64 || t.dtype == StDType::F16 ||
                      t.dtype == StDType::BF16;
      ST_CHECK(floating, "{}: tensor '{}' holds {}; parameters must be F32 (F64, F16 and BF16 are converted)",
               path, t.name, st_dtype_name(t.dtype));
    }
  for (const auto& b : buffers)
    for (const auto& e : layout.entries()) {
      const NamedTensor& t = *by_name.at(b.prefix + e.name);
      if (t.dtype == StDType::F32) {
        if (!t.bytes.empty()) std::memcpy(b.data + e.offset, t.bytes.data(), t.bytes.size());
      } else {
        std::vector<float> v = t.to_f32();
        std::copy(v.begin(), v.end(), b.data + e.offset);
      }
    }
  return file.metadata;
}

// Entries in registration order, then each alias (a tied weight) with its entry's bytes: the
// order of the PyTorch module's state_dict, whose tied head comes last.
void save_params(const std::string& path, const ParamStore& store, const Metadata& metadata) {
  ST_CHECK(store.finalized(), "{}: cannot save parameters before the model is built (ParamStore::finalize)", path);
  const HostReadView values = store.read_view();  // the buffer itself on a host-accessible backend
  std::vector<TensorRef> refs;
  for (const auto& e : store.entries()) refs.push_back({e.name, StDType::F32, e.shape, values.data() + e.offset});
  for (const auto& [name, i] : store.aliases()) {
    const ParamEntry& e = store.entries()[i];
    refs.push_back({name, StDType::F32, e.shape, values.data() + e.offset});
  }
  write_safetensors(path, std::span<const TensorRef>(refs), metadata);
}

// Straight into the buffer on a host-accessible backend; otherwise into host memory, uploaded
// once the whole file has been checked and converted.
Metadata load_params(const std::string& path, ParamStore& store) {
  if (store.host_accessible()) {
    FlatBufferOut b{"", store.params()};
    return load_flat(path, store, std::span<const FlatBufferOut>(&b, 1));
  }
  std::vector<float> staged(store.size());
  FlatBufferOut b{"", staged.data()};
  Metadata metadata = load_flat(path, store, std::span<const FlatBufferOut>(&b, 1));
  store.write_params(staged);
  return metadata;
}

}  // namespace seqtrain
