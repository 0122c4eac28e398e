// Tests that python/seqtrain_torch reads what seqtrain writes and the other way round:
// ParamStores named like seqtrain's models load into the PyTorch mirror modules with
// load_state_dict(strict=True) and come back bit for bit, strict loading refuses a file with a
// missing or mis-shaped tensor, and the pure-numpy safetensors writer produces the same bytes
// as the C++ writer. Skipped when python3-torch is missing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/rng.h"
#include "io/safetensors.h"
#include "safetensors_fixtures.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using seqtrain::testing::run_python;
using seqtrain::testing::every_dtype_tensors;
using seqtrain::testing::tensor_of;
using seqtrain::testing::TempDir;

constexpr int kStrictRefused = 3;  // mirror_check.py's exit code when strict loading refuses

// The parameters of an LSTM (gates = 4) or GRU (gates = 3) forecaster, named and ordered like
// the PyTorch state_dict of seqtrain_torch.Forecaster.
ParamStore rnn_store(int64_t gates, int64_t input, int64_t hidden, int layers, bool bidirectional, int64_t output,
                     const std::string& skip = "") {
  ParamStore s;
  int64_t dirs = bidirectional ? 2 : 1;
  for (int k = 0; k < layers; ++k)
    for (int64_t d = 0; d < dirs; ++d) {
      std::string sfx = "_l" + std::to_string(k) + (d ? "_reverse" : "");
      int64_t in = k == 0 ? input : hidden * dirs;
      std::vector<std::pair<std::string, Shape>> entries = {{"rnn.weight_ih" + sfx, {gates * hidden, in}},
                                                            {"rnn.weight_hh" + sfx, {gates * hidden, hidden}},
                                                            {"rnn.bias_ih" + sfx, {gates * hidden}},
                                                            {"rnn.bias_hh" + sfx, {gates * hidden}}};
      for (const auto& [name, shape] : entries)
        if (name != skip) s.add(name, shape);
    }
  s.add("head.weight", {output, hidden * dirs});
  s.add("head.bias", {output});
  s.finalize();
  return s;
}

void fill_random(ParamStore& s, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = 0; i < s.size(); ++i) s.params()[i] = rng.normal() * 0.3f;
}

// Writes `store`, lets mirror_check.py load it into the mirror module and save it back, then
// checks that the file python wrote loads into a fresh copy of the store bit for bit.
void expect_round_trip(ParamStore& store, ParamStore& fresh, const std::string& args) {
  TempDir dir;
  fill_random(store, 42);
  save_params(dir / "model.safetensors", store, {{"model", "mirror-test"}});
  int rc = run_python("mirror_check.py", args + " --expect-meta model=mirror-test " + (dir / "model.safetensors") +
                                             " " + (dir / "back.safetensors"));
  ASSERT_EQ(rc, 0) << "mirror_check.py failed (its stderr is above)";
  Metadata meta = load_params(dir / "back.safetensors", fresh);
  EXPECT_EQ(meta.at("writer"), "seqtrain_torch");
  ASSERT_EQ(store.size(), fresh.size());
  EXPECT_EQ(std::memcmp(store.params(), fresh.params(), store.size() * sizeof(float)), 0);
}

TEST(SafetensorsPythonMirror, LstmBidirectionalRoundTripIsBitExact) {
  SEQTRAIN_REQUIRE_TORCH();
  ParamStore a = rnn_store(4, 3, 5, 2, true, 4), b = rnn_store(4, 3, 5, 2, true, 4);
  expect_round_trip(a, b, "--type lstm --input-size 3 --hidden 5 --layers 2 --bidirectional --output-size 4");
}

TEST(SafetensorsPythonMirror, GruRoundTripIsBitExact) {
  SEQTRAIN_REQUIRE_TORCH();
  ParamStore a = rnn_store(3, 2, 6, 3, false, 1), b = rnn_store(3, 2, 6, 3, false, 1);
  expect_round_trip(a, b, "--type gru --input-size 2 --hidden 6 --layers 3 --output-size 1");
}

TEST(SafetensorsPythonMirror, MlpNamesMatchMirror) {
  // The contract the C++ MLP implements: body.{3j}.weight/bias (ReLU and Dropout take indices
  // 3j+1 and 3j+2 in the nn.Sequential), then head.*; the first Linear sees lookback*input.
  SEQTRAIN_REQUIRE_TORCH();
  auto make = [] {
    ParamStore s;
    s.add("body.0.weight", {7, 6 * 3});
    s.add("body.0.bias", {7});
    s.add("body.3.weight", {7, 7});
    s.add("body.3.bias", {7});
    s.add("body.6.weight", {7, 7});
    s.add("body.6.bias", {7});
    s.add("head.weight", {2, 7});
    s.add("head.bias", {2});
    s.finalize();
    return s;
  };
  ParamStore a = make(), b = make();
  expect_round_trip(a, b, "--type mlp --input-size 3 --lookback 6 --hidden 7 --layers 3 --output-size 2");
}

TEST(SafetensorsPythonMirror, StrictLoadRefusesMissingName) {
  SEQTRAIN_REQUIRE_TORCH();
  TempDir dir;
  ParamStore s = rnn_store(4, 3, 5, 2, true, 4, "rnn.bias_hh_l1_reverse");
  fill_random(s, 1);
  save_params(dir / "m.safetensors", s);
  EXPECT_EQ(run_python("mirror_check.py", "--type lstm --input-size 3 --hidden 5 --layers 2 --bidirectional "
                                          "--output-size 4 --expect-strict-failure " + (dir / "m.safetensors")),
            kStrictRefused);
}

TEST(SafetensorsPythonMirror, StrictLoadRefusesWrongShape) {
  SEQTRAIN_REQUIRE_TORCH();
  TempDir dir;
  ParamStore s = rnn_store(4, 3, 5, 1, false, 4);  // hidden 5 written, hidden 6 expected
  fill_random(s, 1);
  save_params(dir / "m.safetensors", s);
  EXPECT_EQ(run_python("mirror_check.py", "--type lstm --input-size 3 --hidden 6 --output-size 4 "
                                          "--expect-strict-failure " + (dir / "m.safetensors")),
            kStrictRefused);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(SafetensorsPythonMirror, NumpyReaderAndWriterAgreeWithCpp) {
  // Values must match EXPECTED in tests/py/safetensors_roundtrip.py.
  SEQTRAIN_REQUIRE_TORCH();
  TempDir dir;
  std::vector<NamedTensor> ts = every_dtype_tensors();
  Metadata meta = {{"a", "1"}, {"b", "two"}};
  write_safetensors(dir / "cpp.safetensors", ts, meta);
  ASSERT_EQ(run_python("safetensors_roundtrip.py", (dir / "cpp.safetensors") + " " + (dir / "py.safetensors")), 0);

  ts.erase(ts.begin() + 3);  // the python side cannot hold BF16 in numpy and leaves it out
  SafetensorsFile back = read_safetensors(dir / "py.safetensors");
  EXPECT_EQ(back.metadata, meta);
  ASSERT_EQ(back.tensors.size(), ts.size());
  for (const auto& t : ts) {
    EXPECT_EQ(back.at(t.name).dtype, t.dtype) << t.name;
    EXPECT_EQ(back.at(t.name).shape, t.shape) << t.name;
    EXPECT_EQ(back.at(t.name).bytes, t.bytes) << t.name;
  }
  write_safetensors(dir / "cpp2.safetensors", ts, meta);
  EXPECT_EQ(read_all(dir / "py.safetensors"), read_all(dir / "cpp2.safetensors"));
}

}  // namespace
}  // namespace seqtrain
