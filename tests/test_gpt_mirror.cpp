// The PyTorch mirror of the GPT (python/seqtrain_torch/gpt.py, nanoGPT's names) and its
// reference scripts, before and independently of the C++ GPT: the Python self-tests
// (tests/py/gpt_selftest.py), ParamStores named like the GPT's state_dict loading strictly into
// the mirror and coming back bit for bit (tests/py/gpt_mirror_check.py), strict loading refusing
// missing, mis-shaped and untied files, and tests/py/gpt_ref.py exchanging .npy files with C++.
// The tied head is stored under both names, transformer.wte.weight and lm_head.weight, with
// identical bytes. Skipped when python3-torch is missing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "io/safetensors.h"
#include "nn/params.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using seqtrain::testing::read_npy;
using seqtrain::testing::run_python;
using seqtrain::testing::TempDir;
using seqtrain::testing::write_file;
using seqtrain::testing::write_npy;

constexpr int kStrictRefused = 3;  // gpt_mirror_check.py's exit code when strict loading refuses

struct GptSizes {
  int64_t vocab = 13, block = 8, layers = 2, heads = 2, embd = 16;
  bool bias = true;
  std::string args() const {
    return "--vocab " + std::to_string(vocab) + " --block " + std::to_string(block) + " --n-layer " +
           std::to_string(layers) + " --n-head " + std::to_string(heads) + " --n-embd " + std::to_string(embd) +
           " --bias " + (bias ? "1" : "0");
  }
};

// The GPT's parameters named, shaped and ordered like nanoGPT's state_dict (gpt.py's docstring),
// the tied head as a second entry lm_head.weight. `skip` leaves one name out; `misshape` gives
// one tensor a last dimension one too large (a mis-shaped file).
ParamStore gpt_store(const GptSizes& g, const std::string& skip = "", const std::string& misshape = "") {
  ParamStore s;
  const int64_t C = g.embd;
  auto add = [&](const std::string& name, Shape shape) {
    if (name == skip) return;
    if (name == misshape) shape.back() += 1;
    s.add(name, shape);
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    add(name + ".weight", {out, in});
    if (g.bias) add(name + ".bias", {out});
  };
  auto norm = [&](const std::string& name) {
    add(name + ".weight", {C});
    if (g.bias) add(name + ".bias", {C});
  };
  add("transformer.wte.weight", {g.vocab, C});
  add("transformer.wpe.weight", {g.block, C});
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    norm(h + "ln_1");
    linear(h + "attn.c_attn", 3 * C, C);
    linear(h + "attn.c_proj", C, C);
    norm(h + "ln_2");
    linear(h + "mlp.c_fc", 4 * C, C);
    linear(h + "mlp.c_proj", C, 4 * C);
  }
  norm("transformer.ln_f");
  add("lm_head.weight", {g.vocab, C});
  s.finalize();
  return s;
}

// Random weights; the head's entry then gets the embedding's values (the tie), unless untied.
void fill_random(ParamStore& s, uint64_t seed, bool tie = true) {
  Rng rng(seed);
  for (size_t i = 0; i < s.size(); ++i) s.params()[i] = rng.normal() * 0.3f;
  const ParamEntry* wte = s.find("transformer.wte.weight");
  const ParamEntry* head = s.find("lm_head.weight");
  if (tie && wte && head) std::memcpy(s.params() + head->offset, s.params() + wte->offset,
                                      numel_of(wte->shape) * sizeof(float));
}

TEST(GptMirror, PythonSelfTest) {
  SEQTRAIN_REQUIRE_TORCH();
  EXPECT_EQ(run_python("gpt_selftest.py", ""), 0) << "gpt_selftest.py failed (its report is above)";
}

// Writes the store, lets gpt_mirror_check.py load it strictly, check the tie, run a forward and
// save it back (also with the input's metadata, which must give the input's very bytes), then
// loads python's file into a fresh store and compares bit for bit.
void expect_round_trip(const GptSizes& g) {
  TempDir dir;
  ParamStore a = gpt_store(g), b = gpt_store(g);
  fill_random(a, 42);
  save_params(dir / "model.safetensors", a, {{"model", "gpt-mirror-test"}});
  ASSERT_EQ(run_python("gpt_mirror_check.py", g.args() + " --expect-meta model=gpt-mirror-test --expect-same-bytes " +
                                                  (dir / "model.safetensors") + " " + (dir / "back.safetensors")),
            0)
      << "gpt_mirror_check.py failed (its stderr is above)";
  Metadata meta = load_params(dir / "back.safetensors", b);
  EXPECT_EQ(meta.at("writer"), "seqtrain_torch");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.size() * sizeof(float)), 0);
}

TEST(GptMirror, CppWrittenWeightsRoundTripBitExact) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_round_trip(GptSizes{});
}

TEST(GptMirror, CppWrittenWeightsRoundTripBitExactWithoutBias) {
  SEQTRAIN_REQUIRE_TORCH();
  GptSizes g;
  g.bias = false;
  g.layers = 3;
  g.heads = 4;
  expect_round_trip(g);
}

int check_refused(const GptSizes& g, ParamStore& s, bool tie = true) {
  TempDir dir;
  fill_random(s, 1, tie);
  save_params(dir / "m.safetensors", s);
  return run_python("gpt_mirror_check.py", g.args() + " --expect-strict-failure " + (dir / "m.safetensors"));
}

TEST(GptMirror, StrictLoadRefusesMissingMisShapedAndUntied) {
  SEQTRAIN_REQUIRE_TORCH();
  GptSizes g;
  {
    ParamStore s = gpt_store(g, "transformer.h.1.ln_2.bias");
    EXPECT_EQ(check_refused(g, s), kStrictRefused) << "a missing bias";
  }
  {
    ParamStore s = gpt_store(g, "lm_head.weight");
    EXPECT_EQ(check_refused(g, s), kStrictRefused) << "the tied head stored only as transformer.wte.weight";
  }
  {
    ParamStore s = gpt_store(g, "", "transformer.h.0.mlp.c_fc.weight");
    EXPECT_EQ(check_refused(g, s), kStrictRefused) << "a mis-shaped weight";
  }
  {
    ParamStore s = gpt_store(g);
    EXPECT_EQ(check_refused(g, s, /*tie=*/false), kStrictRefused) << "differing copies of the tied head";
  }
  {
    GptSizes nobias = g;
    nobias.bias = false;
    ParamStore s = gpt_store(g);  // biases present, a bias-free model expected
    EXPECT_EQ(check_refused(nobias, s), kStrictRefused) << "biases a bias=False model lacks";
  }
}

// gpt_ref.py reads what C++ writes (weights, int64 ids, config.json) and writes what the C++
// parity tests will read: logits [B, T, V], loss, grad_<name>.npy per state_dict name (the tied
// head's twice, identical), and in train mode losses.npy and final.safetensors.
TEST(GptMirror, GptRefExchangesFilesWithCpp) {
  SEQTRAIN_REQUIRE_TORCH();
  GptSizes g;
  const int64_t B = 3, T = 6, N = 4;
  TempDir dir;
  ParamStore s = gpt_store(g);
  fill_random(s, 7);
  for (size_t i = 0; i < s.size(); ++i) s.params()[i] *= 0.3f;
  save_params(dir / "model.safetensors", s);
  write_file(dir, "config.json", "{\"vocab_size\": 13, \"block_size\": 8, \"n_layer\": 2, \"n_head\": 2, "
                                 "\"n_embd\": 16, \"bias\": true}");
  Rng rng(3);
  auto ids = [&](int64_t n) {
    std::vector<int64_t> v(n);
    for (auto& x : v) x = static_cast<int64_t>(rng.below(g.vocab));
    return v;
  };
  write_npy(dir / "idx.npy", ids(B * T), {B, T});
  write_npy(dir / "targets.npy", ids(B * T), {B, T});
  write_npy(dir / "batches_idx.npy", ids(N * B * T), {N, B, T});
  write_npy(dir / "batches_tgt.npy", ids(N * B * T), {N, B, T});

  ASSERT_EQ(run_python("gpt_ref.py", "grad " + dir.path.string()), 0);
  std::vector<int64_t> shape;
  std::vector<double> logits = read_npy(dir / "logits.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{B, T, g.vocab}));
  std::vector<double> loss = read_npy(dir / "loss.npy");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_TRUE(std::isfinite(loss[0]));
  EXPECT_NEAR(loss[0], std::log(double(g.vocab)), 0.5);  // small weights: close to uniform
  for (const auto& e : s.entries()) {
    read_npy(dir / ("grad_" + e.name + ".npy"), &shape);
    EXPECT_EQ(shape, std::vector<int64_t>(e.shape.begin(), e.shape.end())) << e.name;
  }
  EXPECT_EQ(read_npy(dir / "grad_transformer.wte.weight.npy"), read_npy(dir / "grad_lm_head.weight.npy"));

  ASSERT_EQ(run_python("gpt_ref.py", "train " + dir.path.string() +
                                         " --lr 1e-2 --schedule cosine --warmup 2 --total 4 --min-lr 1e-3"),
            0);
  std::vector<double> losses = read_npy(dir / "losses.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{N}));
  // seqtrain's cosine: (s + 1) / W warmup, then cosine over T - W steps down to min_lr.
  std::vector<double> lrs = read_npy(dir / "lrs.npy"), want = {5e-3, 1e-2, 1e-2, 5.5e-3};
  ASSERT_EQ(lrs.size(), want.size());
  for (size_t i = 0; i < lrs.size(); ++i) EXPECT_NEAR(lrs[i], want[i], 1e-15) << "step " << i;
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  ParamStore back = gpt_store(g);
  load_params(dir / "final.safetensors", back);
  const ParamEntry* wte = back.find("transformer.wte.weight");
  const ParamEntry* head = back.find("lm_head.weight");
  EXPECT_EQ(std::memcmp(back.params() + wte->offset, back.params() + head->offset,
                        numel_of(wte->shape) * sizeof(float)),
            0);
  EXPECT_NE(std::memcmp(back.params(), s.params(), s.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace seqtrain
