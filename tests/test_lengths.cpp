// Variable-length samples from the data to the model: an npy source's lengths (files or a padding
// value) and their refusals, the one batch builder filling lengths and the key-padding mask for
// every worker count and through the cache (an older cache format rebuilt), padding left out of
// the z-score statistics, the paths outside the loader (evaluation) handing the model the same
// lengths, and train.task refusing a task the data cannot serve.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "data/cache.h"
#include "data/concat.h"
#include "data/loader.h"
#include "data/npy.h"
#include "data/synthetic_sets.h"
#include "data/zscore_source.h"
#include "models/model.h"
#include "train/data_plan.h"
#include "train/objective.h"
#include "train/trainer.h"
#include "test_util.h"

namespace seqtrain {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::TempDir;
using testing::write_file;
using testing::write_npy;

constexpr int64_t N = 23, T = 7, F = 2;

// X [N, T, F] whose padded steps (t >= len[i]) hold `pad`, real steps never do; lengths 1..T.
struct Padded {
  std::vector<float> x;
  std::vector<int64_t> len;
  explicit Padded(float pad = -9.f) : x(N * T * F), len(N) {
    for (int64_t i = 0; i < N; ++i) {
      len[i] = 1 + (i * 5) % T;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t f = 0; f < F; ++f)
          x[(i * T + t) * F + f] = t < len[i] ? float(i) + 0.1f * float(t) + 0.01f * float(f) : pad;
    }
  }
};

std::vector<int64_t> lengths_of(const BatchSource& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.size())), out(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  s.fill_lengths(idx, out.data());
  return out;
}

TEST(Lengths, NpyLengthsFromAFileOrAPaddingValue) {
  TempDir dir;
  Padded p;
  write_npy(dir / "x.npy", p.x, {N, T, F});
  write_npy(dir / "len.npy", p.len, {N});
  NpySource a = NpySource::open(dir / "x.npy");
  EXPECT_FALSE(a.has_lengths());
  a.read_lengths(dir / "len.npy");
  ASSERT_TRUE(a.has_lengths());
  EXPECT_EQ(lengths_of(a), p.len);
  NpySource b = NpySource::open(dir / "x.npy");
  b.lengths_from_padding(-9.0);
  EXPECT_EQ(lengths_of(b), p.len);
  // Trailing padding only: a pad value inside a sample is data.
  Padded q;
  q.x[(3 * T + 0) * F + 0] = -9.f;
  q.x[(3 * T + 0) * F + 1] = -9.f;
  write_npy(dir / "x2.npy", q.x, {N, T, F});
  NpySource c = NpySource::open(dir / "x2.npy");
  c.lengths_from_padding(-9.0);
  EXPECT_EQ(lengths_of(c), p.len);
}

TEST(Lengths, BadLengthsNameTheFileSampleAndFix) {
  TempDir dir;
  Padded p;
  write_npy(dir / "x.npy", p.x, {N, T, F});
  auto refuse = [&](std::vector<int64_t> len, std::vector<int64_t> shape) {
    write_npy(dir / "bad.npy", len, shape);
    NpySource s = NpySource::open(dir / "x.npy");
    return error_of([&] { s.read_lengths(dir / "bad.npy"); });
  };
  std::vector<int64_t> l = p.len;
  l[4] = T + 1;
  std::string e = refuse(l, {N});
  EXPECT_CONTAINS(e, "bad.npy");
  EXPECT_CONTAINS(e, "sample 4");
  EXPECT_CONTAINS(e, "between 1 and 7");
  l[4] = 0;
  EXPECT_CONTAINS(refuse(l, {N}), "at least one valid step");
  e = refuse(std::vector<int64_t>(N - 1, 2), {N - 1});
  EXPECT_CONTAINS(e, "must have shape [N] = (23,)");
  EXPECT_CONTAINS(e, "x.npy");
  // A padding value that leaves a sample empty.
  Padded q;
  for (int64_t t = 0; t < T; ++t) q.x[(5 * T + t) * F] = q.x[(5 * T + t) * F + 1] = -9.f;
  write_npy(dir / "x3.npy", q.x, {N, T, F});
  NpySource s = NpySource::open(dir / "x3.npy");
  e = error_of([&] { s.lengths_from_padding(-9.0); });
  EXPECT_CONTAINS(e, "sample 5");
  EXPECT_CONTAINS(e, "leaves it empty");
}

// Every batch's lengths and mask, in order, for a loader of `workers` threads.
std::vector<uint8_t> batches_of(const BatchSource& s, int64_t workers, std::vector<int64_t>* lens) {
  Loader loader(s, LoaderOptions{.workers = workers, .batch_size = 5, .shuffle = true, .seed = 3,
                                 .layout = sample_layout(T, F, false, false, s.y_size())});
  std::vector<uint8_t> masks;
  for (int64_t e = 0; e < 2; ++e) {
    loader.start_epoch(e);
    while (const Batch* b = loader.next()) {
      EXPECT_EQ(b->lengths.shape, (Shape{b->count}));
      EXPECT_EQ(b->key_padding_mask.shape, (Shape{b->count, T}));
      EXPECT_EQ(b->key_padding_mask.dtype, DType::u8);
      const auto* l = b->lengths.data<int64_t>();
      const auto* m = b->key_padding_mask.data<uint8_t>();
      for (int64_t i = 0; i < b->count; ++i) {
        for (int64_t t = 0; t < T; ++t) EXPECT_EQ(m[i * T + t], t >= l[i] ? 1 : 0);
        // The sample's own length, whatever its position in the shuffled batch.
        EXPECT_EQ(l[i], 1 + (b->samples[i] * 5) % T);
        lens->push_back(l[i]);
      }
      masks.insert(masks.end(), m, m + b->count * T);
      loader.release(b);
    }
  }
  return masks;
}

TEST(Lengths, LoaderFillsLengthsAndMaskForAnyWorkerCountAndThroughTheCache) {
  TempDir dir;
  Padded p;
  write_npy(dir / "x.npy", p.x, {N, T, F});
  write_npy(dir / "y.npy", std::vector<float>(N, 1.f), {N, 1});
  write_npy(dir / "len.npy", p.len, {N});
  auto src = std::make_shared<NpySource>(NpySource::open(dir / "x.npy", dir / "y.npy"));
  src->read_lengths(dir / "len.npy");
  std::vector<int64_t> l0, l1, l4, lc, lh;
  const auto m0 = batches_of(*src, 0, &l0);
  EXPECT_EQ(batches_of(*src, 1, &l1), m0);
  EXPECT_EQ(batches_of(*src, 4, &l4), m0);
  EXPECT_EQ(l1, l0);
  EXPECT_EQ(l4, l0);
  // Through a concatenation of two files and the z-score wrapper, then the cache (miss, hit).
  const ConcatSource cat({src, src});
  EXPECT_EQ(lengths_of(cat).size(), size_t(2 * N));
  ZscoreSource z(src, fit_feature_zscore(*src, T, F), F);
  CacheInfo info;
  auto cached = CachedSource::open_or_build(z, dir / "cache", 77, 2, 2, &info);
  EXPECT_FALSE(info.hit);
  EXPECT_EQ(batches_of(*cached, 2, &lc), m0);
  EXPECT_EQ(lc, l0);
  auto hit = CachedSource::open_or_build(z, dir / "cache", 77, 2, 0, &info);
  EXPECT_TRUE(info.hit);
  EXPECT_EQ(batches_of(*hit, 0, &lh), m0);
  // A cache of the older format (no lengths section) is rebuilt, and the log says why.
  {
    std::fstream f(info.path, std::ios::in | std::ios::out | std::ios::binary);
    f.write("STCACHE1", 8);
  }
  auto rebuilt = CachedSource::open_or_build(z, dir / "cache", 77, 2, 0, &info);
  EXPECT_FALSE(info.hit);
  EXPECT_CONTAINS(info.message, "older format 1");
  EXPECT_EQ(lengths_of(*rebuilt), p.len);
  // A source without lengths fills none.
  auto plain = std::make_shared<NpySource>(NpySource::open(dir / "x.npy", dir / "y.npy"));
  Loader loader(*plain, LoaderOptions{.batch_size = 5, .layout = sample_layout(T, F, false, false, 1)});
  loader.start_epoch(0);
  const Batch* b = loader.next();
  EXPECT_EQ(b->lengths.ptr, nullptr);
  EXPECT_EQ(b->key_padding_mask.ptr, nullptr);
  loader.release(b);
}

TEST(Lengths, ZscoreStatisticsLeaveOutPadding) {
  TempDir dir;
  Padded p(1000.f);  // a padding value far from the data: any padded step entering would show
  write_npy(dir / "x.npy", p.x, {N, T, F});
  NpySource s = NpySource::open(dir / "x.npy");
  s.lengths_from_padding(1000.0);
  const Normalizer z = fit_feature_zscore(s, T, F);
  for (int64_t f = 0; f < F; ++f) {
    double sum = 0, sq = 0, n = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t t = 0; t < p.len[i]; ++t) {
        const double v = p.x[(i * T + t) * F + f];
        sum += v;
        sq += v * v;
        ++n;
      }
    const double mean = sum / n;
    EXPECT_NEAR(z.shift[f], mean, 1e-9 * (1 + std::abs(mean)));
    EXPECT_NEAR(z.scale[f], std::sqrt(sq / n - mean * mean), 1e-6);
  }
}

// A model that reports what it was handed: each batch's host lengths and mask.
class LengthProbe final : public Model {
 public:
  LengthProbe() : Model(ModelSpec{.type = "mlp"}) { finish_params(); }
  Tensor forward(const Batch& batch, StepContext& ctx) override {
    const auto l = host_lengths(batch, ctx);
    seen.insert(seen.end(), l.begin(), l.end());
    EXPECT_EQ(batch.key_padding_mask.shape, (Shape{batch.count, T}));
    Tensor out = ctx.arena.tensor({batch.count, 1});
    for (int64_t i = 0; i < batch.count; ++i) out.f32()[i] = float(l[static_cast<size_t>(i)]);
    return out;
  }
  void backward(StepContext&) override {}
  std::vector<int64_t> seen;

 private:
  void init_params(Rng&) override {}
};

TEST(Lengths, EvaluationHandsTheModelEachSamplesLength) {
  TempDir dir;
  Padded p;
  write_npy(dir / "x.npy", p.x, {N, T, F});
  write_npy(dir / "y.npy", std::vector<float>(N, 0.f), {N, 1});
  write_npy(dir / "len.npy", p.len, {N});
  auto src = std::make_shared<NpySource>(NpySource::open(dir / "x.npy", dir / "y.npy"));
  src->read_lengths(dir / "len.npy");
  LengthProbe probe;
  auto objective = make_objective(LossKind::mse, {}, ObjectiveTask::regress);
  // mse of the model's output (each sample's length) against 0: the mean of len^2.
  const double loss = evaluate(probe, *src, sample_layout(T, F, false, false, 1), *objective, 4);
  EXPECT_EQ(probe.seen, p.len);
  double want = 0;
  for (int64_t l : p.len) want += double(l * l);
  EXPECT_NEAR(loss, want / N, 1e-9);
}

std::string npy_config(const TempDir& dir, const std::string& extra) {
  return write_file(dir, "c.yaml",
                    "data:\n  source: npy\n  normalize: none\n  npy:\n    train_x: " + (dir / "x.npy") +
                        "\n    train_y: " + (dir / "y.npy") + "\n" + extra);
}

TEST(Lengths, PlanReadsLengthKeysAndRefusesMixingThem) {
  TempDir dir;
  Padded p;
  write_npy(dir / "x.npy", p.x, {N, T, F});
  write_npy(dir / "y.npy", std::vector<float>(N * 2, 0.f), {N, 2});
  write_npy(dir / "len.npy", p.len, {N});
  const DataPlan a = plan_data(load_config(npy_config(dir, "    train_len: " + (dir / "len.npy") + "\n")));
  ASSERT_TRUE(a.train->has_lengths());
  EXPECT_EQ(lengths_of(*a.train), p.len);
  EXPECT_NE(std::find(a.files.begin(), a.files.end(), dir / "len.npy"), a.files.end());  // in the cache key
  const DataPlan b = plan_data(load_config(npy_config(dir, "    pad_value: -9\n")));
  EXPECT_EQ(lengths_of(*b.train), p.len);
  std::string e = error_of([&] {
    load_config(npy_config(dir, "    train_len: " + (dir / "len.npy") + "\n    pad_value: -9\n"));
  });
  EXPECT_CONTAINS(e, "data.npy.train_len");
  EXPECT_CONTAINS(e, "pad_value none");
  e = error_of([&] {
    load_config(npy_config(dir, "    train_len: " + (dir / "len.npy") + "\n    val_x: " + (dir / "x.npy") +
                                    "\n    val_y: " + (dir / "y.npy") + "\n"));
  });
  EXPECT_CONTAINS(e, "data.npy.val_len");
  EXPECT_CONTAINS(error_of([&] { load_config(npy_config(dir, "    pad_value: nan\n")); }), "finite number or none");
}

TEST(Lengths, TaskTheDataCannotServeIsRefusedByName) {
  TempDir dir;
  Padded p;
  write_npy(dir / "x.npy", p.x, {N, T, F});
  write_npy(dir / "y.npy", std::vector<float>(N * 2, 0.5f), {N, 2});
  // classify with float y: named at train.task, with the fix.
  std::string e = error_of([&] {
    plan_data(load_config(npy_config(dir, "train:\n  task: classify\n  loss: cross_entropy\n")));
  });
  EXPECT_CONTAINS(e, "train.task");
  EXPECT_CONTAINS(e, "float targets");
  // regress on float [N, targets] y; auto keeps today's forecast.
  Config c = load_config(npy_config(dir, "train:\n  task: regress\n"));
  EXPECT_EQ(resolve_task(c, plan_data(c)), ObjectiveTask::regress);
  EXPECT_EQ(make_objective(c, plan_data(c))->name(), "regress/mse");
  c.train.task = "auto";
  EXPECT_EQ(resolve_task(c, plan_data(c)), ObjectiveTask::forecast);
  // regress needs one vector per sample.
  write_npy(dir / "y.npy", std::vector<float>(N * 6, 0.5f), {N, 3, 2});
  c.train.task = "regress";
  EXPECT_CONTAINS(error_of([&] { resolve_task(c, plan_data(c)); }), "[N, targets]");
  // next_token and classify on the wrong source, at load time with the file's position.
  e = error_of([&] { load_config(write_file(dir, "s.yaml", "train:\n  task: next_token\n")); });
  EXPECT_CONTAINS(e, "s.yaml:2");
  EXPECT_CONTAINS(e, "data.source text");
  e = error_of([&] { load_config(write_file(dir, "s.yaml", "train:\n  task: classify\n")); });
  EXPECT_CONTAINS(e, "train.task");
  EXPECT_CONTAINS(e, "npy");
  // Labels with task regress.
  std::vector<float> labels(N);
  for (int64_t i = 0; i < N; ++i) labels[i] = float(i % 3);
  write_npy(dir / "y.npy", labels, {N});
  EXPECT_CONTAINS(error_of([&] { plan_data(load_config(npy_config(dir, "train:\n  task: regress\n"))); }),
                  "set train.task: classify");
}

TEST(Lengths, SyntheticSetsAreDeterministicPaddedAndCoverEveryClass) {
  SetTaskOptions o;
  o.samples = 200;
  const SetSplit a = make_set_split(o), b = make_set_split(o);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.labels, b.labels);
  o.split = 1;
  EXPECT_NE(make_set_split(o).x, a.x);  // val and test are other draws
  std::vector<int64_t> per_class(4, 0);
  for (int64_t i = 0; i < o.samples; ++i) {
    const int64_t n = a.lengths[static_cast<size_t>(i)];
    EXPECT_GE(n, o.min_size);
    EXPECT_LE(n, o.max_size);
    ++per_class[static_cast<size_t>(a.labels[static_cast<size_t>(i)])];
    const float* xi = a.x.data() + i * o.max_size * o.features;
    EXPECT_NE(xi[(n - 1) * o.features], 0.f);
    for (int64_t j = n * o.features; j < o.max_size * o.features; ++j) ASSERT_EQ(xi[j], 0.f) << "sample " << i;
  }
  for (int64_t c : per_class) EXPECT_GT(c, 30);  // 4 classes drawn evenly
}

}  // namespace
}  // namespace seqtrain
