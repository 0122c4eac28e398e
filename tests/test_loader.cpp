// Loader: identical batches for 0, 1 and 4 workers (with shuffle and augmentation), epoch
// coverage and partial batches, resume from a batch cursor, restarting an epoch while workers
// are busy, errors from the source, the held-buffer guard, data-wait accounting and the
// workers: auto table.
#include <gtest/gtest.h>

#include "test_util.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <thread>

#include "core/error.h"
#include "data/augment.h"
#include "data/loader.h"
#include "data/window_dataset.h"

namespace seqtrain {
namespace {

using testing::error_of;
// x[i][j] = sample * 1000 + j + epoch / 8, y[i] = -sample; optional per-sample delay and a
// sample that throws, to exercise overlap and error paths.
struct CountingSource : BatchSource {
  int64_t n = 0, xs = 6;
  int64_t throw_at = -1;
  std::chrono::microseconds delay{0};
  mutable std::atomic<int64_t> fills{0};
  explicit CountingSource(int64_t n_) : n(n_) {}
  int64_t size() const override { return n; }
  int64_t x_size() const override { return xs; }
  int64_t y_size() const override { return 1; }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override {
    for (size_t b = 0; b < idx.size(); ++b) {
      ST_CHECK(idx[b] != throw_at, "sample {} is broken on purpose", idx[b]);
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      for (int64_t j = 0; j < xs; ++j) x[b * xs + j] = float(idx[b] * 1000 + j) + float(epoch) / 8;
      if (y) y[b] = -float(idx[b]);
    }
    fills += 1;
  }
};

// Every batch of `epochs` epochs as raw bytes (x then y per batch), plus batch metadata.
std::vector<std::vector<float>> drain(const BatchSource& src, LoaderOptions opt, int64_t epochs, int64_t first_epoch = 0) {
  Loader loader(src, opt);
  std::vector<std::vector<float>> out;
  for (int64_t e = first_epoch; e < first_epoch + epochs; ++e) {
    loader.start_epoch(e);
    int64_t expect_index = 0;
    while (const Batch* b = loader.next()) {
      EXPECT_EQ(b->epoch, e);
      EXPECT_EQ(b->index, expect_index++);
      std::vector<float> v(b->x, b->x + b->count * src.x_size());
      if (b->y) v.insert(v.end(), b->y, b->y + b->count * src.y_size());
      for (int64_t s : b->samples) v.push_back(float(s));
      out.push_back(std::move(v));
      loader.release(b);
    }
    EXPECT_EQ(expect_index, loader.batches_per_epoch());
  }
  return out;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// A real windowed series: 400 rows of 3 columns with distinct values.
struct SeriesFixture {
  std::shared_ptr<Series> table = std::make_shared<Series>();
  WindowDataset ds;
  SeriesFixture() {
    table->columns = {"a", "b", "c"};
    table->rows = 400;
    for (int64_t r = 0; r < table->rows; ++r)
      for (int c = 0; c < 3; ++c) table->values.push_back(std::sin(0.05f * float(r) * float(c + 1)) + float(c));
    ds = WindowDataset(table, RowRange{0, 400}, {0, 1, 2}, {0}, 16, 2, 1);
  }
};

TEST(DataLoader, IdenticalBatchesForZeroOneAndFourWorkers) {
  SeriesFixture fx;
  WindowSource plain(fx.ds);
  AugmentOptions aug;
  aug.seed = 11;
  aug.jitter_sigma = 0.05f;
  aug.scale_sigma = 0.1f;
  aug.warp_sigma = 0.2f;
  aug.shift_max = 3;
  aug.mask_prob = 0.05f;
  aug.mask_width = 2;
  AugmentedSource augmented(plain, aug, 16, 3);
  for (bool shuffle : {false, true}) {
    for (const BatchSource* src : {static_cast<const BatchSource*>(&plain), static_cast<const BatchSource*>(&augmented)}) {
      LoaderOptions opt;
      opt.batch_size = 24;  // 383 windows: 15 full batches and one of 23
      opt.shuffle = shuffle;
      opt.seed = 5;
      opt.prefetch = 3;
      opt.workers = 0;
      auto ref = drain(*src, opt, 3);
      ASSERT_EQ(ref.size(), 3u * 16u);
      for (int64_t w : {1, 4}) {
        opt.workers = w;
        EXPECT_TRUE(bitwise_equal(ref, drain(*src, opt, 3)))
            << "workers=" << w << " shuffle=" << shuffle << " augmented=" << (src == &augmented);
      }
    }
  }
  // The augmentation really changed the data, and differently per epoch.
  LoaderOptions opt;
  opt.batch_size = 400;
  auto a = drain(plain, opt, 2), b = drain(augmented, opt, 2);
  EXPECT_FALSE(bitwise_equal(a, b));
  EXPECT_NE(std::memcmp(b[0].data(), b[1].data(), 16 * 3 * sizeof(float)), 0);
}

// Ranks fill contiguous shards of the same global batch: together, in rank order, they are
// exactly the one-process batch, for any worker count and for the short last batch too.
TEST(DataLoader, RanksFillTheirShardsOfTheSameGlobalBatch) {
  CountingSource src(103);  // batches of 16: six full, then 7 rows
  const LoaderOptions one{.workers = 0, .prefetch = 2, .batch_size = 16, .shuffle = true, .seed = 5};
  const auto whole = drain(src, one, 2);
  for (int world : {2, 3}) {
    std::vector<std::vector<std::vector<float>>> shards;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o = one;
      o.workers = rank % 2 ? 2 : 0;
      o.rank = rank;
      o.world = world;
      shards.push_back(drain(src, o, 2));
    }
    ASSERT_EQ(shards[0].size(), whole.size());
    for (size_t b = 0; b < whole.size(); ++b) {
      // Rebuild the global batch: x rows of every shard, then y, then sample ids.
      std::vector<float> x, y, ids;
      for (int r = 0; r < world; ++r) {
        const auto& v = shards[r][b];
        const size_t n = v.size() / (src.xs + 2);
        x.insert(x.end(), v.begin(), v.begin() + n * src.xs);
        y.insert(y.end(), v.begin() + n * src.xs, v.begin() + n * (src.xs + 1));
        ids.insert(ids.end(), v.begin() + n * (src.xs + 1), v.end());
        const size_t global = whole[b].size() / (src.xs + 2);
        EXPECT_LE(n, global / world + 1);
        EXPECT_GE(n, global / world);
      }
      x.insert(x.end(), y.begin(), y.end());
      x.insert(x.end(), ids.begin(), ids.end());
      EXPECT_EQ(x, whole[b]) << "world " << world << " batch " << b;
    }
  }
  LoaderOptions bad = one;
  bad.rank = 2;
  bad.world = 2;
  EXPECT_THROW(Loader(src, bad), Error);
}

// The batch's named tensors: values stay views of the floats the source filled, ids and
// labels arrive as int64 in the layout's shape, and a label that is not a whole number >= 0 is
// an error naming the sample, never a silent cast.
TEST(DataLoader, BatchCarriesTypedInputsAndTargets) {
  CountingSource src(10);  // x[j] = sample * 1000 + j (whole numbers at epoch 0), y = -sample
  LoaderOptions o{.workers = 1, .prefetch = 2, .batch_size = 4};
  o.layout.x = {2, 3};
  Loader values(src, o);
  values.start_epoch(0);
  const Batch* b = values.next();
  EXPECT_EQ(b->inputs.dtype, DType::f32);
  EXPECT_EQ(b->inputs.shape, (Shape{4, 2, 3}));
  EXPECT_EQ(b->inputs.f32(), b->x) << "values are a view, not a copy";
  EXPECT_EQ(b->targets.shape, (Shape{4, 1}));
  values.release(b);

  struct Flipped : CountingSource {  // y = +sample: valid labels
    using CountingSource::CountingSource;
    void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override {
      CountingSource::fill(idx, epoch, x, y);
      for (size_t i = 0; i < idx.size(); ++i) y[i] = float(idx[i]);
    }
  } labelled(10);
  LoaderOptions ids = o;
  ids.layout = SampleLayout{.x = {6}, .x_ids = true, .y = {}, .y_ids = true, .mask = {}};
  Loader typed(labelled, ids);
  typed.start_epoch(0);
  b = typed.next();
  ASSERT_EQ(b->inputs.dtype, DType::i64);
  EXPECT_EQ(b->inputs.shape, (Shape{4, 6}));
  EXPECT_EQ(b->inputs.data<int64_t>()[7], 1001);
  ASSERT_EQ(b->targets.dtype, DType::i64);
  EXPECT_EQ(b->targets.shape, (Shape{4}));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(b->targets.data<int64_t>()[i], b->samples[i]);
  typed.release(b);

  Loader negative(src, ids);  // y = -sample: sample 0 is fine, the rest are not labels
  negative.start_epoch(0);
  const std::string err = testing::error_of([&] { negative.release(negative.next()); });
  EXPECT_NE(err.find("is not a whole number >= 0"), std::string::npos) << err;
  EXPECT_NE(err.find("label"), std::string::npos) << err;
}

TEST(DataLoader, EpochVisitsEverySampleOnceWithPartialOrDroppedLastBatch) {
  CountingSource src(103);
  for (bool drop_last : {false, true}) {
    LoaderOptions opt;
    opt.workers = 2;
    opt.batch_size = 10;
    opt.shuffle = true;
    opt.seed = 3;
    opt.drop_last = drop_last;
    Loader loader(src, opt);
    EXPECT_EQ(loader.batches_per_epoch(), drop_last ? 10 : 11);
    loader.start_epoch(4);
    std::set<int64_t> seen;
    int64_t last_count = 0;
    auto order = epoch_order(103, true, 3, 4);
    int64_t pos = 0;
    while (const Batch* b = loader.next()) {
      for (int64_t i = 0; i < b->count; ++i) {
        const int64_t s = b->samples[i];
        EXPECT_EQ(s, order[pos++]);  // the documented epoch_order, chunked
        EXPECT_TRUE(seen.insert(s).second) << "sample " << s << " twice";
        EXPECT_EQ(b->x[i * 6 + 2], float(s * 1000 + 2) + 0.5f);  // epoch 4 / 8
        EXPECT_EQ(b->y[i], -float(s));
      }
      last_count = b->count;
      loader.release(b);
    }
    EXPECT_EQ(seen.size(), drop_last ? 100u : 103u);
    EXPECT_EQ(last_count, drop_last ? 10 : 3);
    EXPECT_EQ(loader.next(), nullptr);  // stays at the end
  }
}

TEST(DataLoader, ResumeFromBatchCursorReplaysTheTail) {
  CountingSource src(50);
  LoaderOptions opt;
  opt.batch_size = 4;
  opt.shuffle = true;
  opt.seed = 9;
  opt.workers = 3;
  auto full = drain(src, opt, 1, 2);
  Loader loader(src, opt);
  loader.start_epoch(2, 5);
  std::vector<std::vector<float>> tail;
  while (const Batch* b = loader.next()) {
    EXPECT_EQ(b->index, 5 + int64_t(tail.size()));
    std::vector<float> v(b->x, b->x + b->count * 6);
    v.insert(v.end(), b->y, b->y + b->count);
    for (int64_t s : b->samples) v.push_back(float(s));
    tail.push_back(std::move(v));
    loader.release(b);
  }
  EXPECT_TRUE(bitwise_equal(tail, std::vector<std::vector<float>>(full.begin() + 5, full.end())));
  EXPECT_CONTAINS(error_of([&] { loader.start_epoch(0, 14); }), "outside the epoch's 13 batches");
}

TEST(DataLoader, RestartingAnEpochWhileWorkersAreBusyDiscardsStaleBatches) {
  CountingSource src(200);
  src.delay = std::chrono::microseconds(200);
  LoaderOptions opt;
  opt.batch_size = 8;
  opt.workers = 4;
  opt.prefetch = 2;
  opt.shuffle = true;
  Loader loader(src, opt);
  loader.start_epoch(0);
  const Batch* held = loader.next();  // an old-epoch batch kept across the restart
  const Batch* b = loader.next();
  loader.release(b);
  loader.start_epoch(1);  // workers are mid-fill of epoch 0 batches
  auto order = epoch_order(200, true, 0, 1);
  int64_t pos = 0;
  while ((b = loader.next()) != nullptr) {
    EXPECT_EQ(b->epoch, 1);
    for (int64_t i = 0; i < b->count; ++i) {
      EXPECT_EQ(b->samples[i], order[pos++]);
      EXPECT_EQ(b->x[i * 6], float(order[pos - 1] * 1000) + 0.125f);
    }
    loader.release(b);
  }
  EXPECT_EQ(pos, 200);
  EXPECT_EQ(held->epoch, 0);  // still intact until released
  loader.release(held);
}

TEST(DataLoader, SourceErrorsReachTheConsumerAndShutdownIsClean) {
  for (int64_t w : {0, 2}) {
    CountingSource src(40);
    src.throw_at = 17;
    LoaderOptions opt;
    opt.batch_size = 5;
    opt.workers = w;
    Loader loader(src, opt);
    loader.start_epoch(0);
    std::string err;
    int64_t good = 0;
    for (;;) {
      try {
        const Batch* b = loader.next();
        if (!b) break;
        ++good;
        loader.release(b);
      } catch (const Error& e) {
        err = e.what();
        break;
      }
    }
    EXPECT_EQ(good, 3) << "workers=" << w;  // batches 0..2 hold samples 0..14
    EXPECT_CONTAINS(err, "sample 17 is broken");
  }
}

TEST(DataLoader, HoldingEveryBufferIsAnErrorNotADeadlock) {
  CountingSource src(100);
  for (int64_t w : {0, 1}) {
    LoaderOptions opt;
    opt.batch_size = 2;
    opt.workers = w;
    opt.prefetch = 1;
    Loader loader(src, opt);  // 2 slots: one prefetching, one held
    loader.start_epoch(0);
    const Batch* a = loader.next();
    const Batch* b = loader.next();
    EXPECT_CONTAINS(error_of([&] { loader.next(); }), "release()");
    loader.release(a);
    EXPECT_CONTAINS(error_of([&] { loader.release(a); }), "released twice");
    const Batch* c = loader.next();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->index, 2);
    loader.release(b);
    loader.release(c);
  }
  EXPECT_CONTAINS(error_of([&] { Loader l(src, LoaderOptions{.workers = 0, .prefetch = 2, .batch_size = 0}); }),
                  "data.batch_size");
  EXPECT_CONTAINS(error_of([&] { Loader l(src, LoaderOptions{.workers = -1}); }), "data.workers");
  EXPECT_CONTAINS(error_of([&] { Loader l(src, LoaderOptions{.workers = 1, .prefetch = 0}); }), "data.prefetch");
}

TEST(DataLoader, PrefetchHidesFillTimeAndDataWaitIsMeasured) {
  // 20 batches of 2 ms fill each; the "step" sleeps 4 ms. Synchronous: the step waits the whole
  // fill (>= 40 ms). Two workers fill ahead while the step runs, so wait drops to about one fill.
  CountingSource src(20);
  src.delay = std::chrono::milliseconds(2);
  double wait[2];
  for (int k = 0; k < 2; ++k) {
    LoaderOptions opt;
    opt.batch_size = 1;
    opt.workers = k == 0 ? 0 : 2;
    opt.prefetch = 2;
    Loader loader(src, opt);
    loader.start_epoch(0);
    while (const Batch* b = loader.next()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(4));
      loader.release(b);
    }
    wait[k] = loader.wait_seconds();
    loader.reset_wait();
    EXPECT_EQ(loader.wait_seconds(), 0.0);
  }
  EXPECT_GE(wait[0], 0.038);
  EXPECT_LT(wait[1], wait[0] / 2) << "sync " << wait[0] << " s, prefetched " << wait[1] << " s";
}

// Counts live buffers and remembers their addresses, like a pinned-memory allocator would.
struct CountingAllocator : HostAllocator {
  std::set<float*> live;
  int64_t allocations = 0;
  float* allocate(size_t n) override {
    float* p = new float[n == 0 ? 1 : n];
    live.insert(p);
    ++allocations;
    return p;
  }
  void deallocate(float* p, size_t) override {
    EXPECT_EQ(live.erase(p), 1u) << "freed a buffer it did not allocate";
    delete[] p;
  }
};

// Two workers, two slots each, batches of 4: 5 slots (one for the consumer), 10 buffers.
LoaderOptions slot_options(HostAllocator& alloc) {
  LoaderOptions opt;
  opt.workers = 2;
  opt.prefetch = 2;
  opt.batch_size = 4;
  opt.allocator = &alloc;
  return opt;
}

TEST(DataLoader, SlotBuffersComeFromTheGivenAllocatorAndAreReused) {
  CountingSource src(64);
  CountingAllocator alloc;
  {
    Loader loader(src, slot_options(alloc));
    EXPECT_EQ(alloc.allocations, 2 * (2 * 2 + 1));  // x and y for each of 5 slots
    std::set<const float*> seen;
    for (int e = 0; e < 2; ++e) {
      loader.start_epoch(e);
      while (const Batch* b = loader.next()) {
        EXPECT_EQ(alloc.live.count(const_cast<float*>(b->x)), 1u);
        seen.insert(b->x);
        loader.release(b);
      }
    }
    EXPECT_LE(seen.size(), 5u);  // 32 batches through at most 5 reused buffers
    EXPECT_EQ(alloc.allocations, 10);
  }
  EXPECT_TRUE(alloc.live.empty()) << "buffers leaked";
}

TEST(DataLoader, WorkersAutoFollowsCoresAndRam) {
  constexpr int64_t GiB = int64_t{1} << 30;
  std::string why;
  EXPECT_EQ(workers_auto(16, 64 * GiB, &why), 8);
  EXPECT_CONTAINS(why, "data.workers auto = 8");
  EXPECT_EQ(workers_auto(4, 64 * GiB), 3);   // one core left for the step
  EXPECT_EQ(workers_auto(1, 64 * GiB), 0);
  EXPECT_EQ(workers_auto(16, 20 * GiB), 4);
  EXPECT_EQ(workers_auto(16, 10 * GiB, &why), 2);
  EXPECT_CONTAINS(why, "caps workers at 2");
  EXPECT_EQ(workers_auto(64, 7 * GiB, &why), 0);
  EXPECT_CONTAINS(why, "less than 8 GiB");
  EXPECT_EQ(workers_auto(8, 0), 0);  // unknown RAM counts as short
  EXPECT_GE(system_cores(), 1);
  EXPECT_GT(system_available_ram(), 0);
}

// An allocator that refuses after `budget` buffers, as a page-locked pool at its limit does.
struct RefusingAllocator : CountingAllocator {
  int64_t budget;
  explicit RefusingAllocator(int64_t b) : budget(b) {}
  float* allocate(size_t n) override {
    if (budget-- <= 0) throw Error("cudaHostAlloc: out of memory (stand-in)");
    return CountingAllocator::allocate(n);
  }
};

TEST(DataLoader, PinnedSlotsFallBackToTheHeapWhenRefusedAndTheRunGoesOn) {
  CountingSource src(64);
  RefusingAllocator pinned(3);
  FallbackHostAllocator alloc(pinned);
  {
    Loader loader(src, slot_options(alloc));
    EXPECT_EQ(pinned.live.size(), 3u);
    EXPECT_EQ(alloc.fallbacks(), 7u);  // 10 buffers: 3 pinned, 7 from the heap
    EXPECT_CONTAINS(alloc.first_failure(), "out of memory (stand-in)");
    int64_t rows = 0;
    loader.start_epoch(0);
    while (const Batch* b = loader.next()) {
      rows += b->count;
      loader.release(b);
    }
    EXPECT_EQ(rows, 64);
  }
  EXPECT_TRUE(pinned.live.empty()) << "pinned buffers leaked or went to the heap";
}

}  // namespace
}  // namespace seqtrain
