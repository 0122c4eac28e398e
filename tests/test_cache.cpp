// Pre-augmentation cache: a miss builds a file whose samples equal the augmented source's bit
// for bit (epoch e -> cached epoch e % K), a second open is a hit that never calls the source,
// the key changes with file content and settings, a failure while writing leaves no file, a
// stale .tmp or truncated file is never used, an unwritable directory is a clear error, and
// list_caches reports what is there.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/error.h"
#include "data/augment.h"
#include "data/cache.h"
#include "test_util.h"

namespace seqtrain {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

using testing::error_of;
// 40 samples of [10 steps, 2 features]; y = [i]. Counts samples filled; may fail at one sample.
struct Base : BatchSource {
  mutable std::atomic<int64_t> filled{0};
  int64_t fail_at = -1;
  int64_t size() const override { return 40; }
  int64_t x_size() const override { return 20; }
  int64_t y_size() const override { return 1; }
  void fill(std::span<const int64_t> idx, int64_t, float* x, float* y) const override {
    for (size_t b = 0; b < idx.size(); ++b) {
      ST_CHECK(idx[b] != fail_at, "disk read error at sample {}", idx[b]);
      for (int k = 0; k < 20; ++k) x[b * 20 + k] = float(idx[b]) + 0.01f * float(k);
      if (y) y[b] = float(idx[b]);
      ++filled;
    }
  }
};

AugmentOptions aug() {
  AugmentOptions o;
  o.seed = 21;
  o.jitter_sigma = 0.1f;
  o.scale_sigma = 0.1f;
  o.mask_prob = 0.1f;
  return o;
}

std::vector<float> all_samples(const BatchSource& s, int64_t epoch) {
  std::vector<int64_t> idx(static_cast<size_t>(s.size()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  std::vector<float> out(static_cast<size_t>(s.size() * (s.x_size() + s.y_size())));
  s.fill(idx, epoch, out.data(), out.data() + s.size() * s.x_size());
  return out;
}

TEST(DataCache, MissBuildsExactAugmentedEpochsThenHitSkipsTheSource) {
  TempDir dir;
  Base base;
  AugmentedSource augmented(base, aug(), 10, 2);
  const uint64_t key = cache_key({}, "settings v1", 40, 20, 1, 3);
  CacheInfo info;
  auto c = CachedSource::open_or_build(augmented, dir / "cache", key, 3, 2, &info);
  EXPECT_FALSE(info.hit);
  EXPECT_CONTAINS(info.message, "data cache miss, built");
  EXPECT_EQ(info.bytes, 64 + 3 * 40 * 21 * 4 + 16);
  EXPECT_EQ(base.filled.load(), 3 * 40);
  for (int64_t e = 0; e < 6; ++e) {
    auto want = all_samples(augmented, e % 3), got = all_samples(*c, e);
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << "epoch " << e;
  }
  EXPECT_NE(all_samples(*c, 0), all_samples(*c, 1));

  base.filled = 0;
  auto again = CachedSource::open_or_build(augmented, dir / "cache", key, 3, 0, &info);
  EXPECT_TRUE(info.hit);
  EXPECT_CONTAINS(info.message, "data cache hit");
  EXPECT_EQ(base.filled.load(), 0);
  EXPECT_EQ(all_samples(*again, 4), all_samples(*c, 1));

  // Through the loader with 0 and 3 workers: the same batches.
  std::vector<float> seen[2];
  for (int k = 0; k < 2; ++k) {
    LoaderOptions opt;
    opt.workers = k * 3;
    opt.batch_size = 7;
    opt.shuffle = true;
    Loader l(*again, opt);
    l.start_epoch(2);
    while (const Batch* b = l.next()) {
      seen[k].insert(seen[k].end(), b->x, b->x + b->count * 20);
      l.release(b);
    }
  }
  EXPECT_EQ(seen[0], seen[1]);

  auto list = list_caches(dir / "cache");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_TRUE(list[0].complete);
  EXPECT_EQ(list[0].key, key);
  EXPECT_EQ(list[0].epochs, 3);
  EXPECT_EQ(list[0].n, 40);
  EXPECT_TRUE(list_caches(dir / "nowhere").empty());
}

TEST(DataCache, KeyFollowsFileContentAndSettings) {
  TempDir dir;
  std::ofstream(dir / "a.npy", std::ios::binary) << "first content";
  const uint64_t k1 = cache_key({dir / "a.npy"}, "jitter 0.1", 40, 20, 1, 3);
  EXPECT_EQ(cache_key({dir / "a.npy"}, "jitter 0.1", 40, 20, 1, 3), k1);
  EXPECT_NE(cache_key({dir / "a.npy"}, "jitter 0.2", 40, 20, 1, 3), k1);
  EXPECT_NE(cache_key({dir / "a.npy"}, "jitter 0.1", 40, 20, 1, 4), k1);
  std::ofstream(dir / "a.npy", std::ios::binary) << "first c0ntent";  // same size, one byte differs
  const uint64_t k2 = cache_key({dir / "a.npy"}, "jitter 0.1", 40, 20, 1, 3);
  EXPECT_NE(k2, k1);
  EXPECT_CONTAINS(error_of([&] { cache_key({dir / "gone.npy"}, "", 1, 1, 1, 1); }), "gone.npy: cannot read");

  // A new key is a miss even when a cache for the old key exists.
  Base base;
  CacheInfo info;
  CachedSource::open_or_build(base, dir / "c", k1, 1, 0, &info);
  EXPECT_FALSE(info.hit);
  CachedSource::open_or_build(base, dir / "c", k1, 1, 0, &info);
  EXPECT_TRUE(info.hit);
  CachedSource::open_or_build(base, dir / "c", k2, 1, 0, &info);
  EXPECT_FALSE(info.hit);
  EXPECT_EQ(list_caches(dir / "c").size(), 2u);
}

// Every byte of the header and trailer replaced by bytes that make its sizes huge, negative or
// zero: each damaged file is listed as incomplete or as what it was, and opening it is a hit with
// the exact samples or a miss that rebuilds them; never an overflow (UBSan) or a read outside it.
TEST(DataCache, DamagedHeadersAreRebuiltNeverRead) {
  TempDir dir;
  Base base;
  const uint64_t key = cache_key({}, "damage", 40, 20, 1, 2);
  CacheInfo info;
  CachedSource::open_or_build(base, dir / "c", key, 2, 0, &info);
  const std::string path = info.path;
  std::ifstream in(path, std::ios::binary);
  const std::string valid(std::istreambuf_iterator<char>(in), {});
  const std::vector<float> want = all_samples(base, 1);
  int hits = 0, misses = 0;
  for (size_t i = 0; i < valid.size(); ++i) {
    if (i == 64) i = valid.size() - 16;  // the data between: any float is a valid sample
    for (unsigned char b : {0x00, 0x7f, 0x80, 0xff}) {
      std::string m = valid;
      m[i] = static_cast<char>(b);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << m;
      for (const CacheEntry& e : list_caches(dir / "c"))  // listed as complete: its sizes fit the file
        if (e.complete) {
          EXPECT_LE(e.epochs * e.n * (e.x_size + e.y_size) * 4 + 80, e.bytes) << "byte " << i;
        }
      auto c = CachedSource::open_or_build(base, dir / "c", key, 2, 0, &info);
      (info.hit ? hits : misses) += 1;
      ASSERT_EQ(all_samples(*c, 1), want) << "byte " << i << " set to " << int(b);
    }
  }
  EXPECT_GT(misses, 0);
  EXPECT_GT(hits, 0);  // a byte already equal, or the header's zero padding
}

TEST(DataCache, FailureWhileWritingLeavesNoUsableFile) {
  TempDir dir;
  Base base;
  base.fail_at = 33;
  const uint64_t key = cache_key({}, "s", 40, 20, 1, 2);
  for (int64_t workers : {0, 2}) {
    std::string e = error_of([&] { CachedSource::open_or_build(base, dir / "c", key, 2, workers); });
    EXPECT_CONTAINS(e, "disk read error at sample 33");
    EXPECT_TRUE(fs::is_empty(dir / "c")) << "a partial file was left behind";
  }
  // A .tmp from a process killed mid-write is never used, and a cut-off final file is rebuilt.
  base.fail_at = -1;
  std::ofstream(dir.path / "c" / fmt::format("{:016x}.stcache.tmp.99999", key), std::ios::binary) << "STCACHE1 partial";
  CacheInfo info;
  auto c = CachedSource::open_or_build(base, dir / "c", key, 2, 0, &info);
  EXPECT_FALSE(info.hit);
  const std::string path = info.path;
  fs::resize_file(path, fs::file_size(path) - 100);
  auto list = list_caches(dir / "c");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_FALSE(list[0].complete);
  c = CachedSource::open_or_build(base, dir / "c", key, 2, 0, &info);
  EXPECT_FALSE(info.hit);
  EXPECT_CONTAINS(info.message, "incomplete or did not match, rebuilt");
  EXPECT_EQ(all_samples(*c, 1), all_samples(base, 1));
  CachedSource::open_or_build(base, dir / "c", key, 2, 0, &info);
  EXPECT_TRUE(info.hit);
}

TEST(DataCache, UnwritableDirectoryIsAClearError) {
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  Base base;
  std::string e = error_of([&] { CachedSource::open_or_build(base, dir / "file/sub", 7, 1); });
  EXPECT_CONTAINS(e, "data.cache: cannot create the directory");
  EXPECT_CONTAINS(e, "file/sub");
  EXPECT_CONTAINS(error_of([&] { CachedSource::open_or_build(base, dir / "c", 7, 0); }), "data.cache_epochs");
}

}  // namespace
}  // namespace seqtrain
