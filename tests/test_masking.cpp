// Masked-pretraining masks (data/masking.h) and the batches that carry them: each strategy's
// masked share against mask_ratio over valid positions, span runs against mean_span, patches
// whole, nothing masked past a sample's length; fill_batch's loss mask and targets (x itself)
// identical for 0, 1 and 4 loader workers and after a resume, fixed per sample for validation
// and new each epoch for training; the data plan of npy X alone and the errors of the keys.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "config/config.h"
#include "core/error.h"
#include "data/batch_layout.h"
#include "data/loader.h"
#include "data/masking.h"
#include "data/window_dataset.h"
#include "train/data_plan.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::error_of;
using testing::TempDir;
using testing::write_file;
using testing::write_npy;

// moola's sample shape.
constexpr int64_t kT = 105, kF = 4;

MaskOptions options(MaskStrategy s, double ratio = 0.15) {
  MaskOptions o;
  o.strategy = s;
  o.ratio = ratio;
  o.patch_size = 8;
  o.mean_span = 3.0;
  return o;
}

int64_t length_of(int64_t sample) { return 1 + (sample * 37) % kT; }

// Draws `n` samples' masks (lengths 1..T, varied) and returns the masked share of valid positions;
// fails the test on any masked position at t >= length.
double masked_share(const MaskOptions& o, int64_t n, bool vary_lengths) {
  SampleMasking m{o, 1234, MaskDraw::per_epoch};
  std::vector<float> mask(kT * kF);
  double masked = 0, valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = vary_lengths ? length_of(i) : kT;
    Rng rng = m.rng(0, i);
    draw_mask(o, rng, kT, kF, len, mask.data());
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t f = 0; f < kF; ++f) {
        const float v = mask[t * kF + f];
        EXPECT_TRUE(v == 0.f || v == 1.f);
        if (t >= len && v != 0.f) {
          ADD_FAILURE() << "sample " << i << " masked at t " << t << " >= length " << len;
          return -1;
        }
        masked += v;
      }
    valid += double(len * kF);
  }
  return masked / valid;
}

TEST(Masking, MaskedShareIsTheRatioForEveryStrategy) {
  for (MaskStrategy s : {MaskStrategy::patch, MaskStrategy::random, MaskStrategy::span})
    for (bool vary : {false, true})
      for (double r : {0.15, 0.4}) {
        const double share = masked_share(options(s, r), 10000, vary);
        EXPECT_NEAR(share / r, 1.0, 0.01) << "strategy " << int(s) << " ratio " << r << " varied lengths " << vary;
      }
}

TEST(Masking, SpanRunsHaveTheMeanLengths) {
  const MaskOptions o = options(MaskStrategy::span, 0.15);
  SampleMasking m{o, 99, MaskDraw::per_epoch};
  std::vector<float> mask(kT * kF);
  // [unmasked, masked]: steps in the state, and runs that ended before T. A run cut at T still
  // counts its steps (a geometric law's estimate under censoring: steps / completed runs).
  double runs[2] = {0, 0}, steps[2] = {0, 0};
  for (int64_t i = 0; i < 10000; ++i) {
    Rng rng = m.rng(0, i);
    draw_mask(o, rng, kT, kF, kT, mask.data());
    for (int64_t f = 0; f < kF; ++f)
      for (int64_t t = 0; t < kT;) {
        const float v = mask[t * kF + f];
        int64_t e = t;
        while (e < kT && mask[e * kF + f] == v) ++e;
        runs[int(v)] += e < kT;
        steps[int(v)] += double(e - t);
        t = e;
      }
  }
  EXPECT_NEAR(steps[1] / runs[1] / o.mean_span, 1.0, 0.05);
  EXPECT_NEAR(steps[0] / runs[0] / (o.mean_span * (1 - o.ratio) / o.ratio), 1.0, 0.05);
  // mean_span 1: every masked run is one step.
  MaskOptions one = o;
  one.mean_span = 1.0;
  Rng rng(5);
  draw_mask(one, rng, kT, kF, kT, mask.data());
  for (int64_t t = 0; t + 1 < kT; ++t)
    for (int64_t f = 0; f < kF; ++f) EXPECT_FALSE(mask[t * kF + f] == 1.f && mask[(t + 1) * kF + f] == 1.f);
}

TEST(Masking, PatchMasksAreWholePatchesOverEveryFeature) {
  for (int64_t patch : {int64_t{1}, int64_t{8}, int64_t{10}, kT}) {
    MaskOptions o = options(MaskStrategy::patch, 0.3);
    o.patch_size = patch;
    SampleMasking m{o, 7, MaskDraw::per_epoch};
    std::vector<float> mask(kT * kF);
    int64_t masked_patches = 0;
    for (int64_t i = 0; i < 500; ++i) {
      const int64_t len = length_of(i);
      Rng rng = m.rng(0, i);
      draw_mask(o, rng, kT, kF, len, mask.data());
      for (int64_t p0 = 0; p0 < len; p0 += patch) {
        const float v = mask[p0 * kF];
        masked_patches += v == 1.f;
        for (int64_t t = p0; t < std::min(len, p0 + patch); ++t)
          for (int64_t f = 0; f < kF; ++f) ASSERT_EQ(mask[t * kF + f], v) << "patch " << patch << " sample " << i;
      }
      for (int64_t t = len; t < kT; ++t)
        for (int64_t f = 0; f < kF; ++f) ASSERT_EQ(mask[t * kF + f], 0.f);
    }
    EXPECT_GT(masked_patches, 0);
  }
}

// A variable-length source of distinct values x[i][t][f] = i + t / 128 + f / 8; y none.
struct LengthSource : BatchSource {
  int64_t n, T, F;
  LengthSource(int64_t n_, int64_t t, int64_t f) : n(n_), T(t), F(f) {}
  int64_t size() const override { return n; }
  int64_t x_size() const override { return T * F; }
  int64_t y_size() const override { return 0; }
  void fill(std::span<const int64_t> idx, int64_t, float* x, float*) const override {
    for (size_t b = 0; b < idx.size(); ++b)
      for (int64_t k = 0; k < T * F; ++k) x[b * T * F + k] = float(idx[b]) + float(k / F) / 128 + float(k % F) / 8;
  }
  bool has_lengths() const override { return true; }
  void fill_lengths(std::span<const int64_t> idx, int64_t* out) const override {
    for (size_t b = 0; b < idx.size(); ++b) out[b] = 1 + (idx[b] * 5) % T;
  }
};

SampleLayout masked_layout(int64_t T, int64_t F, MaskDraw draw, MaskStrategy s = MaskStrategy::span) {
  SampleLayout l = sample_layout(T, F, false, false, 0);
  MaskOptions o = options(s, 0.3);
  o.patch_size = 3;
  l.mask = SampleMasking{o, 42, draw};
  return l;
}

// The loss masks of every batch of epochs [first, first + epochs), batch `first_batch` on in the
// first; checks targets are the inputs themselves and the mask's shape.
std::vector<std::vector<float>> drain_masks(const BatchSource& src, LoaderOptions opt, int64_t first, int64_t epochs,
                                            int64_t first_batch = 0) {
  Loader loader(src, opt);
  std::vector<std::vector<float>> out;
  for (int64_t e = first; e < first + epochs; ++e) {
    loader.start_epoch(e, e == first ? first_batch : 0);
    while (const Batch* b = loader.next()) {
      EXPECT_EQ(b->targets.ptr, b->inputs.ptr);
      EXPECT_EQ(b->targets.shape, b->inputs.shape);
      EXPECT_EQ(b->loss_mask.shape, (Shape{b->count, opt.layout.x[0], opt.layout.x[1]}));
      const auto* m = static_cast<const float*>(b->loss_mask.ptr);
      std::vector<float> v(m, m + b->loss_mask.numel());
      for (int64_t s : b->samples) v.push_back(float(s));
      out.push_back(std::move(v));
      loader.release(b);
    }
  }
  return out;
}

TEST(Masking, LoaderMasksAreTheSameForAnyWorkerCountAndAfterResume) {
  LengthSource src(53, 12, 3);
  for (MaskStrategy s : {MaskStrategy::patch, MaskStrategy::random, MaskStrategy::span}) {
    LoaderOptions opt{.batch_size = 5, .shuffle = true, .seed = 3, .layout = masked_layout(12, 3, MaskDraw::per_epoch, s)};
    const auto ref = drain_masks(src, opt, 0, 3);
    ASSERT_EQ(ref.size(), 33u);
    for (int64_t w : {1, 4}) {
      opt.workers = w;
      EXPECT_EQ(drain_masks(src, opt, 0, 3), ref) << w << " workers";
    }
    // Resumed at epoch 1, batch 4: the uninterrupted run's batches from there on.
    opt.workers = 2;
    const auto resumed = drain_masks(src, opt, 1, 2, 4);
    EXPECT_EQ(resumed, std::vector<std::vector<float>>(ref.begin() + 11 + 4, ref.end()));
    // The resume replay's fill_batch (no loader) builds the same batch.
    const auto order = epoch_order(53, true, 3, 1);
    BatchBuffers buf;
    buf.reserve(src, 5);
    Batch b;
    fill_batch(src, opt.layout, std::span<const int64_t>(order.data() + 20, 5), 1, buf, b);
    std::vector<float> v(buf.loss_mask.begin(), buf.loss_mask.end());
    for (int64_t i : b.samples) v.push_back(float(i));
    EXPECT_EQ(v, ref[11 + 4]);
  }
}

TEST(Masking, FillBatchMasksOnlyValidStepsAndKeepsXAsTarget) {
  LengthSource src(20, 12, 3);
  BatchBuffers buf;
  buf.reserve(src, 20);
  std::vector<int64_t> idx(20);
  for (int64_t i = 0; i < 20; ++i) idx[i] = i;
  Batch b;
  fill_batch(src, masked_layout(12, 3, MaskDraw::per_epoch), idx, 0, buf, b);
  ASSERT_EQ(b.loss_mask.dtype, DType::f32);
  ASSERT_EQ(b.lengths.numel(), 20);
  EXPECT_EQ(b.targets.ptr, b.inputs.ptr);
  double masked = 0;
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t t = 0; t < 12; ++t)
      for (int64_t f = 0; f < 3; ++f) {
        const float m = buf.loss_mask[(i * 12 + t) * 3 + f];
        if (t >= buf.lengths[i]) { EXPECT_EQ(m, 0.f) << "sample " << i << " t " << t; }
        masked += m;
      }
  EXPECT_GT(masked, 0);
  // Without a mask in the layout, no loss mask and no targets (the source has no y).
  fill_batch(src, sample_layout(12, 3, false, false, 0), idx, 0, buf, b);
  EXPECT_EQ(b.loss_mask.ptr, nullptr);
  EXPECT_EQ(b.targets.ptr, nullptr);
}

TEST(Masking, ValidationMasksAreFixedTrainingMasksChangeEachEpoch) {
  LengthSource src(16, 12, 3);
  std::vector<int64_t> idx(16);
  for (int64_t i = 0; i < 16; ++i) idx[i] = i;
  auto masks = [&](MaskDraw draw, int64_t epoch, uint64_t seed = 42) {
    SampleLayout l = masked_layout(12, 3, draw);
    l.mask->seed = seed;
    BatchBuffers buf;
    buf.reserve(src, 16);
    Batch b;
    fill_batch(src, l, idx, epoch, buf, b);
    return buf.loss_mask;
  };
  EXPECT_EQ(masks(MaskDraw::per_sample, 0), masks(MaskDraw::per_sample, 5));
  EXPECT_EQ(masks(MaskDraw::per_epoch, 2), masks(MaskDraw::per_epoch, 2));
  EXPECT_NE(masks(MaskDraw::per_epoch, 0), masks(MaskDraw::per_epoch, 1));
  EXPECT_NE(masks(MaskDraw::per_sample, 0), masks(MaskDraw::per_epoch, 0));  // streams apart
  EXPECT_NE(masks(MaskDraw::per_sample, 0), masks(MaskDraw::per_sample, 0, 43));  // the seed matters
  // A sample's mask does not depend on its batch-mates or its row.
  std::vector<int64_t> one = {7};
  SampleLayout l = masked_layout(12, 3, MaskDraw::per_sample);
  BatchBuffers buf;
  buf.reserve(src, 1);
  Batch b;
  fill_batch(src, l, one, 3, buf, b);
  const auto all = masks(MaskDraw::per_sample, 0);
  EXPECT_EQ(buf.loss_mask, std::vector<float>(all.begin() + 7 * 36, all.begin() + 8 * 36));
}

// npy X [N, T, F] (lengths 1..T) for the data plan tests.
struct NpyFixture {
  static constexpr int64_t N = 30, T = 10, F = 2;
  TempDir dir;
  NpyFixture() {
    std::vector<float> x(N * T * F);
    std::vector<int64_t> len(N);
    for (int64_t i = 0; i < N; ++i) len[i] = 1 + (i * 3) % T;
    for (size_t k = 0; k < x.size(); ++k) x[k] = float(k % 17) * 0.25f;
    write_npy(dir / "x.npy", x, {N, T, F});
    write_npy(dir / "len.npy", len, {N});
    write_npy(dir / "y.npy", std::vector<float>(N, 1.f), {N});
  }
  Config config(const std::string& npy_extra, const std::string& train_extra = "") const {
    return load_config(write_file(dir, "c.yaml", "data:\n  source: npy\n  npy:\n    train_x: " + (dir / "x.npy") +
                                                     "\n" + npy_extra + "train:\n  task: masked_pretrain\n" +
                                                     train_extra));
  }
};

TEST(Masking, PlanReadsNpyXAloneWithOrWithoutValidation) {
  NpyFixture d;
  ::testing::internal::CaptureStderr();
  const DataPlan p = plan_data(d.config(""));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(p.masking);
  EXPECT_EQ(p.train->y_size(), 0);
  EXPECT_EQ(p.val, nullptr);
  EXPECT_EQ(p.steps, NpyFixture::T);
  EXPECT_EQ(p.features, NpyFixture::F);
  EXPECT_EQ(sample_layout(p, MaskDraw::per_epoch).mask->draw, MaskDraw::per_epoch);
  EXPECT_EQ(sample_layout(p, MaskDraw::per_sample).mask->draw, MaskDraw::per_sample);
  // Validation X without y, lengths from files: the batches mask valid steps only.
  const std::string val = "    val_x: " + (d.dir / "x.npy") + "\n";
  const std::string lens = "    train_len: " + (d.dir / "len.npy") + "\n    val_len: " + (d.dir / "len.npy") + "\n";
  const DataPlan q = plan_data(d.config(val + lens, "  masking:\n    strategy: random\n    mask_ratio: 0.5\n"));
  ASSERT_NE(q.val, nullptr);
  ASSERT_TRUE(q.val->has_lengths());
  std::vector<int64_t> idx(NpyFixture::N);
  for (int64_t i = 0; i < NpyFixture::N; ++i) idx[i] = i;
  BatchBuffers buf;
  buf.reserve(*q.val, NpyFixture::N);
  Batch b;
  fill_batch(*q.val, sample_layout(q, MaskDraw::per_sample), idx, 0, buf, b);
  ASSERT_NE(b.loss_mask.ptr, nullptr);
  EXPECT_EQ(b.targets.ptr, b.inputs.ptr);
  double masked = 0;
  for (int64_t i = 0; i < NpyFixture::N; ++i)
    for (int64_t k = 0; k < NpyFixture::T * NpyFixture::F; ++k) {
      const float m = buf.loss_mask[i * NpyFixture::T * NpyFixture::F + k];
      if (k / NpyFixture::F >= buf.lengths[i]) { EXPECT_EQ(m, 0.f); }
      masked += m;
    }
  EXPECT_GT(masked, 0);
  // y files given anyway: a warning naming them, and the run goes on without reading them.
  ::testing::internal::CaptureStderr();
  const DataPlan r = plan_data(d.config("    train_y: " + (d.dir / "y.npy") + "\n"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_CONTAINS(err, "data.npy.train_y");
  EXPECT_CONTAINS(err, "unused");
  EXPECT_EQ(r.train->y_size(), 0);
}

TEST(Masking, KeysTheDataCannotServeAreRefusedByName) {
  NpyFixture d;
  // patch_size above T: named with T and the fix (random/span ignore patch_size).
  std::string e = error_of([&] { plan_data(d.config("", "  masking:\n    patch_size: 11\n")); });
  EXPECT_CONTAINS(e, "train.masking.patch_size");
  EXPECT_CONTAINS(e, "T = 10");
  EXPECT_CONTAINS(e, "at most 10");
  EXPECT_NO_THROW(plan_data(d.config("", "  masking:\n    patch_size: 10\n")));
  EXPECT_NO_THROW(plan_data(d.config("", "  masking:\n    strategy: span\n    patch_size: 11\n")));
  // Another source than npy.
  e = error_of([&] { load_config(write_file(d.dir, "s.yaml", "train:\n  task: masked_pretrain\n")); });
  EXPECT_CONTAINS(e, "train.task");
  EXPECT_CONTAINS(e, "data.source is synthetic");
  EXPECT_CONTAINS(e, "set data.source npy");
  // npy without X.
  e = error_of([&] {
    load_config(write_file(d.dir, "s.yaml", "data:\n  source: npy\ntrain:\n  task: masked_pretrain\n"));
  });
  EXPECT_CONTAINS(e, "data.npy.train_x");
  // span: a ratio whose unmasked runs would be shorter than a step.
  e = error_of([&] { d.config("", "  masking:\n    strategy: span\n    mean_span: 1\n    mask_ratio: 0.6\n"); });
  EXPECT_CONTAINS(e, "train.masking.mask_ratio");
  EXPECT_CONTAINS(e, "mean_span");
}

}  // namespace
}  // namespace seqtrain
