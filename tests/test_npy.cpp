// NPY reader: every supported dtype, format version and shape against files numpy wrote
// (tests/py/npy_write.py; skipped without python3-numpy), refusal of Fortran order, big-endian
// and unsupported dtypes, hand-made corrupt files (magic, version, header, truncation,
// trailing bytes), NpySource layout and X/y mismatch, and that a large file is mapped, not read.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>

#include "core/error.h"
#include "data/loader.h"
#include "data/npy.h"
#include "data/window_dataset.h"
#include "data/zscore_source.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::TempDir;

using testing::error_of;
bool numpy_available() {
  static int ok = -1;
  if (ok < 0) ok = testing::run_command("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return ok == 1;
}

#define REQUIRE_NUMPY()                                                                     \
  do {                                                                                      \
    if (!numpy_available()) GTEST_SKIP() << "python3-numpy is not installed; skipped";      \
  } while (0)

// Files written once per test binary run by numpy.
const TempDir& numpy_files() {
  static TempDir dir;
  static bool done = false;
  if (!done) {
    done = true;
    EXPECT_EQ(testing::run_python("npy_write.py", dir.path.string()), 0) << "tests/py/npy_write.py failed";
  }
  return dir;
}

// The value npy_write.py stores at flat index i for a dtype of this kind.
float expected(const std::string& dtype, int64_t i) {
  if (dtype == "bool") return i % 3 == 0 ? 1.f : 0.f;
  if (dtype[0] == 'i') return float(i % 100 - 50);
  if (dtype[0] == 'u') return float(i % 200);
  return float(i) * 0.25f - 3.f;
}

TEST(DataNpy, AllDtypesVersionsAndShapesMatchNumpy) {
  REQUIRE_NUMPY();
  const TempDir& dir = numpy_files();
  const std::vector<std::string> dtypes = {"bool",   "int8",   "int16",  "int32",   "int64",  "uint8",
                                           "uint16", "uint32", "uint64", "float32", "float64"};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"s3", {4, 5, 3}}, {"s2", {6, 7}}, {"s1", {9}}, {"s0", {0, 2, 2}}};
  int checked = 0;
  for (int v = 1; v <= 3; ++v) {
    for (const auto& dt : dtypes) {
      for (const auto& [name, shape] : shapes) {
        const std::string path = dir / ("v" + std::to_string(v) + "_" + dt + "_" + name + ".npy");
        NpyArray a = open_npy(path);
        SCOPED_TRACE(path);
        EXPECT_EQ(a.version_major, v);
        EXPECT_EQ(std::string(npy_dtype_name(a.dtype)), dt);
        EXPECT_EQ(a.shape, shape);
        std::vector<float> all(static_cast<size_t>(a.count));
        a.read_floats(0, a.count, all.data());
        for (int64_t i = 0; i < a.count; ++i) ASSERT_EQ(all[i], expected(dt, i)) << "element " << i;
        if (a.count > 5) {
          EXPECT_EQ(a.at(5), expected(dt, 5));
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 3 * 11 * 4);
  NpyArray a = open_npy(dir / "auto.npy");
  EXPECT_EQ(a.shape_str(), "(2, 3, 4)");
  EXPECT_CONTAINS(error_of([&] { a.read_floats(20, 5, nullptr); }), "outside its 24 elements");
}

// write_npy_f32 (predict's output): read back by this reader and by numpy, 1-D to 3-D.
TEST(DataNpy, WrittenFloat32FilesReadBackHereAndInNumpy) {
  TempDir dir;
  std::vector<float> v(2 * 3 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 3.f;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{24}, {6, 4}, {2, 3, 4}}) {
    const std::string path = dir / ("w" + std::to_string(shape.size()) + ".npy");
    write_npy_f32(path, shape, v.data());
    const NpyArray a = open_npy(path);
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.dtype, NpyDtype::F32);
    EXPECT_EQ(a.data_offset % 64, 0) << "numpy aligns the data to 64 bytes";
    for (int64_t i = 0; i < a.count; ++i) EXPECT_EQ(a.at(i), v[i]) << path << " element " << i;
  }
  if (!numpy_available()) GTEST_SKIP() << "python3-numpy is not installed; numpy's side skipped";
  const std::string check = "import numpy as np; a = np.load('" + (dir / "w3.npy") +
                            "'); assert a.dtype == np.float32 and a.shape == (2, 3, 4), (a.dtype, a.shape); "
                            "assert (a.ravel() == 0.5 * np.arange(24, dtype=np.float32) - 3).all(); "
                            "assert np.load('" + (dir / "w1.npy") + "').shape == (24,)";
  EXPECT_EQ(testing::run_command("/usr/bin/python3 -c \"" + check + "\""), 0);
}

TEST(DataNpy, RefusesFortranOrderBigEndianAndUnsupportedDtypes) {
  REQUIRE_NUMPY();
  const TempDir& dir = numpy_files();
  const auto err = [&](const std::string& name) { return error_of([&] { open_npy(dir / name); }); };
  std::string e = err("fortran.npy");
  EXPECT_CONTAINS(e, "fortran.npy: header byte");
  EXPECT_CONTAINS(e, "Fortran order");
  EXPECT_CONTAINS(e, "ascontiguousarray");
  EXPECT_CONTAINS(err("bigendian.npy"), "big-endian");
  EXPECT_CONTAINS(err("object.npy"), "Python objects");
  EXPECT_CONTAINS(err("complex.npy"), "complex");
  EXPECT_CONTAINS(err("strings.npy"), "strings");
  EXPECT_CONTAINS(err("half.npy"), "float16");
  EXPECT_CONTAINS(err("structured.npy"), "structured dtypes");
  EXPECT_CONTAINS(err("half.npy"), "astype(numpy.float32)");
}

// A valid v1 float32 file [2, 3] by the test_util writer, as bytes to corrupt.
std::string valid_bytes(const TempDir& dir) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  testing::write_npy(dir / "ok.npy", v, {2, 3});
  std::ifstream f(dir / "ok.npy", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string open_bytes_error(const TempDir& dir, const std::string& bytes) {
  std::ofstream(dir / "bad.npy", std::ios::binary) << bytes;
  return error_of([&] { open_npy(dir / "bad.npy"); });
}

TEST(DataNpy, HandMadeCorruptFilesNameFileAndByte) {
  TempDir dir;
  const std::string ok = valid_bytes(dir);
  NpyArray a = open_npy(dir / "ok.npy");
  EXPECT_EQ(a.at(4), 5.f);
  EXPECT_EQ(a.data_offset + 24, int64_t(ok.size()));

  EXPECT_CONTAINS(open_bytes_error(dir, ""), "not a .npy file");
  EXPECT_CONTAINS(open_bytes_error(dir, "PK\x03\x04 zip file......"), "magic");
  std::string v = ok;
  v[6] = 4;
  EXPECT_CONTAINS(open_bytes_error(dir, v), "byte 6: .npy format version 4.0");
  v = ok;
  v[8] = char(0xff);  // header length 255 + data does not fit in the file
  EXPECT_CONTAINS(open_bytes_error(dir, v), "truncated header");
  v = ok;
  v[10] = '[';
  std::string e = open_bytes_error(dir, v);
  EXPECT_CONTAINS(e, "bad.npy: corrupt .npy header at byte 10: expected '{'");
  v = ok;
  v.replace(v.find("'shape'"), 7, "'shapo'");
  EXPECT_CONTAINS(open_bytes_error(dir, v), "unknown key 'shapo'");
  v = ok;
  v.replace(v.find("(2,3,)"), 6, "(2,x,)");
  e = open_bytes_error(dir, v);
  EXPECT_CONTAINS(e, "expected a non-negative integer dimension");
  EXPECT_CONTAINS(e, "at byte " + std::to_string(ok.find("(2,3,)") + 3));
  v = ok;
  v.replace(v.find("'descr'"), 7, "'dscr' ");
  EXPECT_CONTAINS(open_bytes_error(dir, v), "unknown key 'dscr'");
  e = open_bytes_error(dir, ok.substr(0, ok.size() - 3));
  EXPECT_CONTAINS(e, "truncated data: shape (2, 3) of float32 needs 24 bytes from byte " +
                         std::to_string(a.data_offset) + ", but only 21");
  EXPECT_CONTAINS(open_bytes_error(dir, ok + "xx"), "2 unexpected bytes after the data");
  v = ok;
  v.replace(v.find("<f4"), 3, "<f2");
  EXPECT_CONTAINS(open_bytes_error(dir, v), "float16");
  v = ok;
  v.replace(v.find("<f4"), 3, "<q4");
  EXPECT_CONTAINS(open_bytes_error(dir, v), "not a supported numeric dtype");
  EXPECT_CONTAINS(error_of([&] { open_npy(dir / "missing.npy"); }), "missing.npy: cannot open");
}

TEST(DataNpy, NpySourceFillsSamplesAndChecksXAgainstY) {
  REQUIRE_NUMPY();
  const TempDir& dir = numpy_files();
  NpySource src = NpySource::open(dir / "X.npy", dir / "Y.npy");
  EXPECT_EQ(src.size(), 10);
  EXPECT_EQ(src.steps(), 4);
  EXPECT_EQ(src.features(), 3);
  EXPECT_EQ(src.x_size(), 12);
  EXPECT_EQ(src.y_size(), 4);
  std::vector<int64_t> idx = {7, 2};
  std::vector<float> x(24), y(8);
  src.fill(idx, 0, x.data(), y.data());
  for (int b = 0; b < 2; ++b) {
    for (int k = 0; k < 12; ++k) EXPECT_EQ(x[b * 12 + k], expected("float64", idx[b] * 12 + k));
    for (int k = 0; k < 4; ++k) EXPECT_EQ(y[b * 4 + k], expected("float32", idx[b] * 4 + k));
  }
  NpySource labels = NpySource::open(dir / "X.npy", dir / "labels.npy");
  EXPECT_EQ(labels.y_size(), 1);
  labels.fill(idx, 0, x.data(), y.data());
  EXPECT_EQ(y[0], float(7 - 50));
  EXPECT_EQ(NpySource::open(dir / "X.npy").y_size(), 0);

  // Through the loader with workers: same as a direct fill.
  LoaderOptions opt;
  opt.workers = 2;
  opt.batch_size = 3;
  Loader loader(src, opt);
  loader.start_epoch(0);
  const Batch* b = loader.next();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->x[12], expected("float64", 12));
  loader.release(b);

  std::string e = error_of([&] { NpySource::open(dir / "X.npy", dir / "labels_short.npy"); });
  EXPECT_CONTAINS(e, "shape mismatch");
  EXPECT_CONTAINS(e, "X.npy has 10 samples");
  EXPECT_CONTAINS(e, "labels_short.npy has 9");
  EXPECT_CONTAINS(error_of([&] { NpySource::open(dir / "labels.npy"); }), "X must have shape [N, T, F]");
}

// NaN or inf in a valid step of X, or in y, is refused naming the file, sample, step and feature,
// by fill() and by check_values() (a training run's pass before it writes anything); in the
// padding after a sample's length it is allowed (never read). A run on such X writes nothing.
TEST(DataNpy, NonFiniteValuesAreRefusedWhereTheModelReadsThem) {
  TempDir dir;
  std::vector<float> x(3 * 4 * 2, 0.5f), y(3, 1.f);
  x[1 * 8 + 2 * 2 + 1] = std::numeric_limits<float>::quiet_NaN();  // sample 1, step 2, feature 1
  write_npy_f32(dir / "x.npy", {3, 4, 2}, x.data());
  write_npy_f32(dir / "y.npy", {3}, y.data());
  NpySource src = NpySource::open(dir / "x.npy", dir / "y.npy");
  std::vector<float> bx(8), by(1);
  const std::vector<int64_t> zero = {0}, one = {1};
  src.fill(zero, 0, bx.data(), by.data());  // sample 0 is clean
  std::string e = error_of([&] { src.fill(one, 0, bx.data(), by.data()); });
  EXPECT_CONTAINS(e, "x.npy: sample 1 holds nan at step 2, feature 1 (X of shape (3, 4, 2))");
  EXPECT_CONTAINS(e, "np.nan_to_num");
  EXPECT_EQ(error_of([&] { src.check_values(); }), e);
  // Lengths that end sample 1 before step 2 put the NaN in its padding: nothing to refuse.
  const std::vector<float> lengths = {4, 2, 4};
  write_npy_f32(dir / "len.npy", {3}, lengths.data());
  src.read_lengths(dir / "len.npy");
  src.check_values();
  // A target: y[2] = inf.
  y[2] = std::numeric_limits<float>::infinity();
  write_npy_f32(dir / "y.npy", {3}, y.data());
  NpySource with_y = NpySource::open(dir / "x.npy", dir / "y.npy");
  with_y.read_lengths(dir / "len.npy");
  EXPECT_CONTAINS(error_of([&] { with_y.check_values(); }), "y.npy: sample 2 holds inf at element 0 of its target");
  // Through the CLI: refused before the run directory exists.
  const std::string cfg = testing::write_file(dir, "run.yaml",
      "data:\n  source: npy\n  normalize: none\n  npy:\n    train_x: x.npy\n    train_y: y.npy\n"
      "model:\n  type: lstm\n  hidden: 4\n  layers: 1\ntrain:\n  task: regress\n  epochs: 1\n  batch_size: 2\n");
  const int rc = testing::run_command("cd " + dir.path.string() + " && " + testing::seqtrain_binary() + " train " + cfg +
                                      " --out run > log 2>&1");
  EXPECT_EQ(rc, 2);
  std::ifstream log(dir / "log");
  EXPECT_CONTAINS(std::string(std::istreambuf_iterator<char>(log), {}), "x.npy: sample 1 holds nan");
  EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "the refused run left a directory";
}

int64_t rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

TEST(DataNpy, LargeFileIsMemoryMappedNotRead) {
  // 512 MiB of float32 zeros as a sparse file: opening it and reading a few samples must not
  // pull the file into memory.
  TempDir dir;
  const int64_t n = 1 << 14, t = 128, f = 64;
  std::vector<float> none;
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ", " +
                       std::to_string(t) + ", " + std::to_string(f) + "), }";
  header += std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
  {
    std::ofstream o(dir / "big.npy", std::ios::binary);
    o.write("\x93NUMPY\x01\x00", 8);
    const uint16_t hl = static_cast<uint16_t>(header.size());
    o.write(reinterpret_cast<const char*>(&hl), 2);
    o << header;
  }
  ASSERT_EQ(truncate((dir / "big.npy").c_str(), static_cast<off_t>(10 + header.size() + n * t * f * 4)), 0);
  const int64_t before = rss_bytes();
  NpySource src = NpySource::open(dir / "big.npy");
  std::vector<float> x(static_cast<size_t>(4 * t * f), 1.f);
  std::vector<int64_t> idx = {0, 5000, 9999, n - 1};
  src.fill(idx, 0, x.data(), nullptr);
  EXPECT_EQ(x[0], 0.f);
  EXPECT_EQ(x.back(), 0.f);
  EXPECT_LT(rss_bytes() - before, 64 << 20) << "RSS grew as if the file were read whole";

  // A whole shuffled epoch over it: pages read through the mapping are dropped as reading goes
  // on, so the resident set stays bounded instead of growing to the file's 512 MiB.
  const std::vector<int64_t> order = epoch_order(static_cast<size_t>(n), true, 9, 0);
  std::vector<float> batch(static_cast<size_t>(64 * t * f));
  int64_t grew = 0;
  for (int64_t b = 0; b < n; b += 64) {
    src.fill(std::span<const int64_t>(order.data() + b, 64), 0, batch.data(), nullptr);
    if (b % 1024 == 0) grew = std::max(grew, rss_bytes() - before);
  }
  EXPECT_LT(grew, 96 << 20) << "reading every sample kept the file's pages resident";
}

// Per-feature z-score over every sample and step (the npy source's normalization): feature 0
// varies, feature 1 is constant (scale 1, so it maps to 0 rather than NaN).
TEST(DataNpy, FeatureZscoreFitsEverySampleAndStepAndMapsConstantsToZero) {
  struct Table final : BatchSource {
    std::vector<float> v = {1, 5, 2, 5, 4, 5, /* sample 1 */ -3, 5, 0, 5, 8, 5};
    int64_t size() const override { return 2; }
    int64_t x_size() const override { return 6; }
    int64_t y_size() const override { return 1; }
    void fill(std::span<const int64_t> idx, int64_t, float* x, float* y) const override {
      for (size_t b = 0; b < idx.size(); ++b) {
        if (x) std::copy_n(v.data() + idx[b] * 6, 6, x + b * 6);
        if (y) y[b] = static_cast<float>(idx[b]);
      }
    }
  };
  auto table = std::make_shared<Table>();
  const Normalizer n = fit_feature_zscore(*table, 3, 2);
  const double mean0 = (1 + 2 + 4 - 3 + 0 + 8) / 6.0;
  double var0 = 0;
  for (double v : {1, 2, 4, -3, 0, 8}) var0 += (v - mean0) * (v - mean0) / 6.0;
  ASSERT_EQ(n.shift.size(), 2u);
  EXPECT_DOUBLE_EQ(n.shift[0], mean0);
  EXPECT_DOUBLE_EQ(n.scale[0], std::sqrt(var0));
  EXPECT_DOUBLE_EQ(n.shift[1], 5.0);
  EXPECT_DOUBLE_EQ(n.scale[1], 1.0);
  ZscoreSource z(table, n, 2);
  const int64_t idx[1] = {1};
  float x[6], y[1];
  z.fill(idx, 0, x, y);
  EXPECT_FLOAT_EQ(x[0], static_cast<float>((-3 - mean0) / std::sqrt(var0)));
  EXPECT_FLOAT_EQ(x[4], static_cast<float>((8 - mean0) / std::sqrt(var0)));
  EXPECT_EQ(x[1], 0.f);
  EXPECT_EQ(y[0], 1.f);  // y passes through
}

}  // namespace
}  // namespace seqtrain
