// Pre-augmentation cache (`data.cache: DIR`): K augmented epochs of a training source
// materialized once into one binary file and memory-mapped, so later epochs and later runs
// read augmented samples instead of recomputing them. Epoch e reads cached epoch e % K, so
// augmentation repeats every K epochs (documented trade-off for speed).
//
// File DIR/<key>.stcache, little-endian:
//   [0, 64)   header: magic "STCACHE2", u64 key, i64 n, i64 x_size, i64 y_size, i64 epochs,
//             i64 lengths (1: a lengths section follows the data), 8 bytes zero
//   [64, ..)  float32 data [epochs][n][x_size + y_size]  (x then y per sample)
//   then      int64 lengths [n], when the source has them (variable-length samples)
//   last 16   trailer: magic "STCEND01", u64 key
// The key hashes the source files' content, every data setting and the shape, so a changed
// input or setting selects a different file. The file is written to DIR/<key>.stcache.tmp.<pid>,
// fsynced and renamed: a crash leaves at most a .tmp file, which is never opened. A final file
// whose size or trailer is wrong is treated as a miss and rebuilt.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/npy.h"

namespace seqtrain {

// FNV-1a 64 of a file's bytes (streamed, not loaded whole). Error naming the path if unreadable.
uint64_t hash_file_content(const std::string& path);
// The cache key of a source: the content of every file (in order), the data settings as text
// (e.g. the resolved `data:` YAML, augmentation and seed included), and the sample shape.
uint64_t cache_key(const std::vector<std::string>& files, const std::string& settings, int64_t n, int64_t x_size,
                   int64_t y_size, int64_t epochs);

struct CacheInfo {
  bool hit = false;
  std::string path;     // the final .stcache file
  int64_t bytes = 0;    // size on disk
  std::string message;  // one log line: "data cache hit: PATH (123.4 MiB, 5 epochs)" / "... miss: built ..."
};

class CachedSource final : public BatchSource {
 public:
  // Opens DIR/<key>.stcache when complete (hit); otherwise fills `epochs` epochs of every sample
  // from `base` (through a Loader with `workers` threads) into it first (miss). Error naming the
  // directory when it cannot be created or written (disk full included); no partial file remains.
  static std::shared_ptr<CachedSource> open_or_build(const BatchSource& base, const std::string& dir, uint64_t key,
                                                     int64_t epochs, int64_t workers = 0, CacheInfo* info = nullptr);

  int64_t size() const override { return n_; }
  int64_t x_size() const override { return xs_; }
  int64_t y_size() const override { return ys_; }
  int64_t epochs() const { return epochs_; }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;
  bool has_lengths() const override { return lengths_ != nullptr; }
  void fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const override;

 private:
  std::shared_ptr<MappedFile> map_;
  int64_t n_ = 0, xs_ = 0, ys_ = 0, epochs_ = 1;
  const unsigned char* data_ = nullptr;
  const unsigned char* lengths_ = nullptr;  // int64 [n] in the mapping, possibly 4-byte aligned: read by memcpy
};

// One cache file of a directory, for `seqtrain data info`.
struct CacheEntry {
  std::string path;
  uint64_t key = 0;
  int64_t n = 0, x_size = 0, y_size = 0, epochs = 0, bytes = 0;
  bool complete = false;  // size and trailer check out (false: will be rebuilt on use)
};
// The .stcache files in dir (none if it does not exist), sorted by path.
std::vector<CacheEntry> list_caches(const std::string& dir);

}  // namespace seqtrain
