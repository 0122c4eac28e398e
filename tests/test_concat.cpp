// Several files per split: glob_files (sorted matches, clear error when none) and ConcatSource
// (global indices across files, batches that straddle a file boundary, shape mismatch refused).
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "data/concat.h"
#include "data/npy.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::TempDir;

using testing::error_of;
// X file with n samples of [2, 1]; sample i of file f holds (f * 100 + i, f * 100 + i + 0.5).
void write_part(const TempDir& dir, const std::string& name, int f, int64_t n, int64_t t = 2) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < t; ++k) v.push_back(float(f * 100 + i) + 0.5f * float(k));
  testing::write_npy(dir / name, v, {n, t, 1});
}

TEST(DataConcat, GlobbedFilesJoinIntoOneIndexSpace) {
  TempDir dir;
  write_part(dir, "X_b.npy", 1, 2);  // sorted order puts X_a first whatever the creation order
  write_part(dir, "X_a.npy", 0, 3);
  write_part(dir, "X_c.npy", 2, 4);
  auto files = glob_files(dir / "X_*.npy", "data.train");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], dir / "X_a.npy");
  std::vector<std::shared_ptr<const BatchSource>> parts;
  for (const auto& f : files) parts.push_back(std::make_shared<NpySource>(NpySource::open(f)));
  ConcatSource all(parts, files);
  EXPECT_EQ(all.size(), 9);
  EXPECT_EQ(all.x_size(), 2);
  std::vector<int64_t> idx = {2, 3, 4, 8, 0, 5};  // straddles both boundaries, then jumps back
  std::vector<float> x(12);
  all.fill(idx, 0, x.data(), nullptr);
  EXPECT_EQ(x, (std::vector<float>{2, 2.5, 100, 100.5, 101, 101.5, 203, 203.5, 0, 0.5, 200, 200.5}));
  std::vector<int64_t> bad = {9};
  EXPECT_CONTAINS(error_of([&] { all.fill(bad, 0, x.data(), nullptr); }), "sample 9 out of range: the files hold 9");

  EXPECT_CONTAINS(error_of([&] { glob_files(dir / "Y_*.npy", "data.val"); }), "data.val: no file matches");
  write_part(dir, "X_d.npy", 3, 2, 3);
  parts.push_back(std::make_shared<NpySource>(NpySource::open(dir / "X_d.npy")));
  files.push_back(dir / "X_d.npy");
  std::string e = error_of([&] { ConcatSource(parts, files); });
  EXPECT_CONTAINS(e, "X_d.npy: samples of 3 x values");
  EXPECT_CONTAINS(e, "same sample shape");
}

}  // namespace
}  // namespace seqtrain
