// Pre-augmentation cache: build through the Loader (so building uses the worker threads and
// yields exactly the batches training would), write with POSIX calls so fsync and the
// rename-into-place can be checked, read back through a read-only mapping.
#include "data/cache.h"

#include "io/atomic_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/text.h"
#include "core/error.h"
#include "core/fnv1a.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

// Version 2 added the lengths section; a version 1 file is rebuilt (its reason logged).
constexpr char kMagic[9] = "STCACHE2";
constexpr char kMagicV1[9] = "STCACHE1";
constexpr char kEnd[9] = "STCEND01";
constexpr int64_t kHeader = 64, kTrailer = 16;


struct Header {
  uint64_t key;
  int64_t n, xs, ys, epochs, lengths;  // lengths: 1 when the samples' lengths follow the floats
};

std::string cache_path(const std::string& dir, uint64_t key) {
  return (fs::path(dir) / fmt::format("{:016x}.stcache", key)).string();
}

// Parses and checks a mapped cache file; false when it is not a complete cache for `key`
// (key 0 = any key, for listing).
bool check(const MappedFile& m, uint64_t key, Header* h) {
  if (m.size < static_cast<size_t>(kHeader + kTrailer) || std::memcmp(m.data, kMagic, 8) != 0) return false;
  std::memcpy(&h->key, m.data + 8, 8);
  std::memcpy(&h->n, m.data + 16, 8);
  std::memcpy(&h->xs, m.data + 24, 8);
  std::memcpy(&h->ys, m.data + 32, 8);
  std::memcpy(&h->epochs, m.data + 40, 8);
  std::memcpy(&h->lengths, m.data + 48, 8);
  if ((key != 0 && h->key != key) || h->n < 0 || h->xs < 0 || h->ys < 0 || h->epochs < 1 ||
      (h->lengths != 0 && h->lengths != 1))
    return false;
  // A damaged header's sizes may overflow any product of them: such a file is no cache.
  int64_t per_sample = 0, floats = 0, data_bytes = 0, length_bytes = 0, size = 0;
  if (__builtin_add_overflow(h->xs, h->ys, &per_sample) || __builtin_mul_overflow(h->epochs, h->n, &floats) ||
      __builtin_mul_overflow(floats, per_sample, &floats) || __builtin_mul_overflow(floats, int64_t{4}, &data_bytes) ||
      __builtin_mul_overflow(h->lengths * 8, h->n, &length_bytes) ||
      __builtin_add_overflow(data_bytes, length_bytes, &size) ||
      __builtin_add_overflow(size, kHeader + kTrailer, &size) || static_cast<int64_t>(m.size) != size)
    return false;
  const unsigned char* t = m.data + m.size - kTrailer;
  uint64_t tkey;
  std::memcpy(&tkey, t + 8, 8);
  return std::memcmp(t, kEnd, 8) == 0 && tkey == h->key;
}

// write() all of it, retrying short writes; Error with the reason (ENOSPC: disk full).
void write_all(int fd, const void* p, size_t n, const std::string& path) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    ST_CHECK(w > 0, "{}: writing the data cache failed: {} (free disk space or point data.cache elsewhere)", path,
             std::strerror(errno));
    b += w;
    n -= static_cast<size_t>(w);
  }
}

// Writes the whole cache to tmp; throws on any failure (the caller removes tmp).
void build(const BatchSource& base, const std::string& tmp, uint64_t key, int64_t epochs, int64_t workers) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "{}: cannot create the data cache file: {} (is data.cache a writable directory?)", tmp,
           std::strerror(errno));
  struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
  unsigned char header[kHeader] = {};
  const int64_t fields[6] = {static_cast<int64_t>(key), base.size(), base.x_size(), base.y_size(), epochs,
                             base.has_lengths() ? 1 : 0};
  std::memcpy(header, kMagic, 8);
  std::memcpy(header + 8, fields, sizeof(fields));
  write_all(fd, header, kHeader, tmp);

  const int64_t xs = base.x_size(), ys = base.y_size();
  LoaderOptions opt;
  opt.workers = workers;
  opt.batch_size = 256;
  Loader loader(base, opt);
  std::vector<float> rows;
  for (int64_t e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    while (const Batch* b = loader.next()) {
      // Interleave x and y per sample so one sample is one contiguous read.
      rows.resize(static_cast<size_t>(b->count * (xs + ys)));
      for (int64_t i = 0; i < b->count; ++i) {
        std::copy_n(b->x + i * xs, xs, rows.data() + i * (xs + ys));
        if (ys > 0) std::copy_n(b->y + i * ys, ys, rows.data() + i * (xs + ys) + xs);
      }
      loader.release(b);
      write_all(fd, rows.data(), rows.size() * sizeof(float), tmp);
    }
  }
  if (base.has_lengths()) {  // once: a length does not depend on the epoch
    std::vector<int64_t> idx(static_cast<size_t>(base.size())), len(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    base.fill_lengths(idx, len.data());
    write_all(fd, len.data(), len.size() * sizeof(int64_t), tmp);
  }
  unsigned char trailer[kTrailer];
  std::memcpy(trailer, kEnd, 8);
  std::memcpy(trailer + 8, &key, 8);
  write_all(fd, trailer, kTrailer, tmp);
  ST_CHECK(::fsync(fd) == 0, "{}: fsync of the data cache failed: {}", tmp, std::strerror(errno));
}

}  // namespace

uint64_t hash_file_content(const std::string& path) {
  return file_fnv1a(path, "to compute the data cache key");
}

uint64_t cache_key(const std::vector<std::string>& files, const std::string& settings, int64_t n, int64_t x_size,
                   int64_t y_size, int64_t epochs) {
  uint64_t h = kFnv1aOffset;
  for (const auto& f : files) {
    const uint64_t c = hash_file_content(f);
    h = fnv1a(&c, sizeof(c), h);
  }
  const uint64_t len = settings.size();  // length first, so "ab"+"c" and "a"+"bc" differ
  h = fnv1a(&len, sizeof(len), h);
  h = fnv1a(settings, h);
  const int64_t dims[4] = {n, x_size, y_size, epochs};
  h = fnv1a(dims, sizeof(dims), h);
  return h == 0 ? 1 : h;  // 0 means "any key" inside this file
}

std::shared_ptr<CachedSource> CachedSource::open_or_build(const BatchSource& base, const std::string& dir, uint64_t key,
                                                          int64_t epochs, int64_t workers, CacheInfo* info) {
  ST_CHECK(epochs >= 1, "data.cache_epochs must be at least 1, got {}", epochs);
  ST_CHECK(key != 0, "data cache: key 0 is reserved; use cache_key()");
  std::error_code ec;
  fs::create_directories(dir, ec);
  ST_CHECK(!ec, "data.cache: cannot create the directory {}: {} (choose a writable directory)", dir, ec.message());
  const std::string path = cache_path(dir, key);
  auto out = std::shared_ptr<CachedSource>(new CachedSource());
  std::string note;
  bool hit = false;
  if (fs::exists(path)) {
    auto m = MappedFile::open(path);
    Header h{};
    if (check(*m, key, &h) && h.n == base.size() && h.xs == base.x_size() && h.ys == base.y_size() &&
        h.epochs == epochs && (h.lengths == 1) == base.has_lengths()) {
      out->map_ = std::move(m);
      hit = true;
    } else if (m->size >= 8 && std::memcmp(m->data, kMagicV1, 8) == 0) {
      note = " (the existing file has the older format 1, without sample lengths: rebuilt)";
    } else {
      note = " (the existing file was incomplete or did not match, rebuilt)";
    }
  }
  if (!hit) {
    const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
    try {
      build(base, tmp, key, epochs, workers);
      fs::rename(tmp, path, ec);
      ST_CHECK(!ec, "{}: cannot rename the finished data cache into place: {}", path, ec.message());
      // fsync the directory so the rename itself survives a crash.
      const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) { ::fsync(dfd); ::close(dfd); }
    } catch (...) {
      fs::remove(tmp, ec);
      throw;
    }
    out->map_ = MappedFile::open(path);
    Header h{};
    ST_CHECK(check(*out->map_, key, &h), "{}: the data cache just written does not verify; the disk may be failing",
             path);
  }
  out->n_ = base.size();
  out->xs_ = base.x_size();
  out->ys_ = base.y_size();
  out->epochs_ = epochs;
  out->data_ = out->map_->data + kHeader;
  if (base.has_lengths())
    out->lengths_ = out->data_ + out->epochs_ * out->n_ * (out->xs_ + out->ys_) * 4;
  if (info) {
    info->hit = hit;
    info->path = path;
    info->bytes = static_cast<int64_t>(out->map_->size);
    info->message = fmt::format("data cache {}: {} ({:.1f} MiB, {} of {}){}", hit ? "hit" : "miss, built", path,
                                static_cast<double>(info->bytes) / (1 << 20), count_of(epochs, "epoch"),
                                count_of(out->n_, "sample"), note);
  }
  return out;
}

void CachedSource::fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const {
  const int64_t e = ((epoch % epochs_) + epochs_) % epochs_;
  const int64_t row = xs_ + ys_;
  for (size_t b = 0; b < idx.size(); ++b) {
    ST_CHECK(0 <= idx[b] && idx[b] < n_, "data cache: sample {} out of range: there are {}", idx[b], n_);
    const unsigned char* p = data_ + ((e * n_ + idx[b]) * row) * 4;
    if (x) std::memcpy(x + static_cast<int64_t>(b) * xs_, p, static_cast<size_t>(xs_) * 4);
    if (y && ys_ > 0) std::memcpy(y + static_cast<int64_t>(b) * ys_, p + xs_ * 4, static_cast<size_t>(ys_) * 4);
  }
}

void CachedSource::fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const {
  ST_CHECK(lengths_ != nullptr, "internal error: the data cache holds no sample lengths");
  for (size_t b = 0; b < idx.size(); ++b) {
    ST_CHECK(0 <= idx[b] && idx[b] < n_, "data cache: sample {} out of range: there are {}", idx[b], n_);
    std::memcpy(lengths + b, lengths_ + idx[b] * 8, sizeof(int64_t));
  }
}

std::vector<CacheEntry> list_caches(const std::string& dir) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    if (de.path().extension() != ".stcache") continue;
    CacheEntry c;
    c.path = de.path().string();
    auto m = MappedFile::open(c.path);
    c.bytes = static_cast<int64_t>(m->size);
    Header h{};
    c.complete = check(*m, 0, &h);
    if (c.complete) {
      c.key = h.key;
      c.n = h.n;
      c.x_size = h.xs;
      c.y_size = h.ys;
      c.epochs = h.epochs;
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.path < b.path; });
  return out;
}

}  // namespace seqtrain
