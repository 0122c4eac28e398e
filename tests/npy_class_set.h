// A small variable-length classification set as npy files (train 48 / val 16 / test 16 samples of
// 8 steps and 3 features, lengths 3..8 with zeros after each, the class lifting one feature), made
// once per test process: what the encoder tests (test_encoder.cpp, test_cnn.cpp) train the binary
// on, the config lines that point a run at it, and the checks of a run's exported encoder.
#pragma once
#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "io/safetensors.h"
#include "models/encoder.h"
#include "test_trainer_util.h"
#include "test_util.h"

namespace seqtrain::testing {

inline constexpr int64_t kSetT = 8, kSetF = 3, kSetClasses = 3;

struct NpyClassSet {
  static int64_t length(int64_t i) { return 3 + i % 6; }  // sample i's valid steps, in every split
  TempDir dir;
  NpyClassSet() {
    Rng rng(11);
    const std::pair<const char*, int64_t> splits[] = {{"train", 48}, {"val", 16}, {"test", 16}};
    for (const auto& [split, n] : splits) {
      std::vector<float> x(static_cast<size_t>(n * kSetT * kSetF), 0.f);
      std::vector<int64_t> y, len;
      for (int64_t i = 0; i < n; ++i) {
        y.push_back(i % kSetClasses);
        len.push_back(length(i));
        for (int64_t t = 0; t < len.back(); ++t)
          for (int64_t f = 0; f < kSetF; ++f)
            x[(i * kSetT + t) * kSetF + f] = 2.f + rng.normal() + (f == y.back() ? 1.5f : 0.f);
      }
      write_npy(dir / (std::string(split) + "_x.npy"), x, {n, kSetT, kSetF});
      write_npy(dir / (std::string(split) + "_y.npy"), y, {n});
      write_npy(dir / (std::string(split) + "_len.npy"), len, {n});
    }
  }
  std::string operator/(const std::string& name) const { return dir / name; }
};

inline const NpyClassSet& npy_class_set() {
  static NpyClassSet d;
  return d;
}

// The config's head: seed 3 and the data section reading the set's nine files.
inline std::string npy_class_set_yaml() {
  const NpyClassSet& d = npy_class_set();
  std::string npy;
  for (const char* split : {"train", "val", "test"})
    for (const char* part : {"x", "y", "len"})
      npy += fmt::format("    {}_{}: {}\n", split, part, d / fmt::format("{}_{}.npy", split, part));
  return "seed: 3\ndata:\n  source: npy\n  workers: 0\n  npy:\n" + npy;
}

// A run the binary trained on the config `write_config` writes into dir, in dir/run, with its
// encoder exported (`seqtrain export RUN --encoder`) to dir/encoder.safetensors.
struct ExportedRun {
  TempDir dir;
  std::string config, run, encoder;
  template <typename WriteConfig>
  explicit ExportedRun(WriteConfig&& write_config) {
    config = write_config(dir);
    run = dir / "run";
    cli::Result r = cli::run_seqtrain("train " + config + " --quiet --out " + run);
    EXPECT_EQ(r.rc, 0) << r.out;
    encoder = dir / "encoder.safetensors";
    cli::Result e = cli::run_seqtrain("export " + run + " --encoder " + encoder);
    EXPECT_EQ(e.rc, 0) << e.out;
  }
};

// The exported encoder holds exactly the model's encoder tensors, byte for byte the checkpoint's,
// says what it is in its metadata, and PyTorch embeds as `seqtrain embed` does.
inline void expect_encoder_round_trip(const ExportedRun& r, const std::string& family, const std::string& pooling) {
  const SafetensorsFile enc = read_safetensors(r.encoder);
  const SafetensorsFile all = read_safetensors(r.run + "/checkpoints/best/model.safetensors");
  size_t encoder_tensors = 0;
  for (const auto& t : all.tensors) {
    const NamedTensor* e = enc.find(t.name);
    if (!is_encoder_tensor(t.name)) {
      EXPECT_EQ(e, nullptr) << t.name << " is no encoder tensor but was exported";
      continue;
    }
    ++encoder_tensors;
    ASSERT_NE(e, nullptr) << t.name << " missing from the encoder file";
    EXPECT_EQ(e->shape, t.shape) << t.name;
    EXPECT_EQ(e->bytes, t.bytes) << t.name;
  }
  EXPECT_EQ(enc.tensors.size(), encoder_tensors);
  EXPECT_EQ(enc.find("head.weight"), nullptr);
  EXPECT_EQ(enc.metadata.at("format"), "seqtrain.encoder");
  EXPECT_EQ(enc.metadata.at("family"), family);
  EXPECT_EQ(enc.metadata.at("pooling"), pooling);
  EXPECT_EQ(enc.metadata.at("input_size"), std::to_string(kSetF));
  EXPECT_EQ(enc.metadata.at("hidden"), "8");

  TempDir io;
  const std::string out = io / "e.npy";
  cli::Result e = cli::run_seqtrain("embed " + r.run + " --input " + (npy_class_set() / "test_x.npy") + " --lengths " +
                          (npy_class_set() / "test_len.npy") + " --output " + out);
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_CONTAINS(e.out, "wrote 16 embeddings of 8 values to " + out);
  std::vector<int64_t> shape;
  read_npy(out, &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{16, 8}));
  if (!torch_available()) GTEST_SKIP() << "python3-torch is not installed; the PyTorch side is skipped";
  EXPECT_EQ(run_python("encoder_check.py", r.encoder + " " + r.run + "/checkpoints/best/state.json " +
                                               (npy_class_set() / "test_x.npy") + " " + out + " " + family + " " +
                                               (npy_class_set() / "test_len.npy")),
            0)
      << family << ": PyTorch's embeddings differ from seqtrain embed's (report above)";
}

}  // namespace seqtrain::testing
