// The character language model: backward against finite differences, logits/loss/gradients
// against PyTorch (LSTM and GRU, 1 and 2 layers), weights round trip both ways, oneDNN and
// gradient checkpointing against the fused path, bad token ids,
// the one-token step against the full forward, and `seqtrain generate` on a checkpoint this
// test trains itself (plus its error paths).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/autotune.h"
#include "cli/generate.h"
#include "data/text.h"
#include "io/safetensors.h"
#include "models/char_lm.h"
#include "models/forecaster.h"
#include "models/text_generator.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_trainer_util.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;
using cli::Result;
using cli::run_seqtrain;

ModelSpec lm_spec(const std::string& type, int64_t V, int64_t E, int64_t H, int64_t layers) {
  ModelSpec s;
  s.type = type;
  s.vocab_size = V;
  s.embed_size = E;
  s.hidden = H;
  s.layers = layers;
  return s;
}

std::vector<float> random_ids(Rng& rng, int64_t n, int64_t V) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(std::min<int64_t>(V - 1, static_cast<int64_t>(rng.uniform() * V)));
  return v;
}

std::vector<int64_t> as_i64(const std::vector<float>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

// Mean cross-entropy of the model on (x, y), optionally with its gradients in params().grads().
double lm_loss(CharLm& m, std::vector<float>& x, std::vector<int64_t>& y, int64_t B, int64_t T, bool grads) {
  Arena arena;
  Tensor logits = ModelPass(m, arena, grads).forward(Tensor(x.data(), {B, T}));
  Tensor target(y.data(), {B, T}, DType::i64);
  const double loss = loss_forward(LossKind::cross_entropy, logits, target);
  if (grads) {
    Tensor d = arena.tensor(logits.shape);
    loss_backward(LossKind::cross_entropy, logits, target, d);
    m.params().zero_grad();
    ModelPass(m, arena, true).backward(d);
  }
  return loss;
}

class CharLmCells : public ::testing::TestWithParam<const char*> {};

// Every parameter's gradient (every 2nd element) against central differences, in f32 with a
// coarse step as test_models does for the MLP.
TEST_P(CharLmCells, BackwardMatchesFiniteDifferences) {
  const int64_t V = 5, E = 3, H = 4, B = 2, T = 4;
  CharLm m(lm_spec(GetParam(), V, E, H, 2));
  Rng rng(7);
  m.init(rng);
  std::vector<float> x = random_ids(rng, B * T, V);
  std::vector<int64_t> y = as_i64(random_ids(rng, B * T, V));
  lm_loss(m, x, y, B, T, true);
  std::vector<double> an, fd;
  float* p = m.params().params();
  for (size_t i = 0; i < m.params().size(); i += 2) {
    const float keep = p[i], eps = 1e-2f;
    p[i] = keep + eps;
    const double up = lm_loss(m, x, y, B, T, false);
    p[i] = keep - eps;
    const double down = lm_loss(m, x, y, B, T, false);
    p[i] = keep;
    fd.push_back((up - down) / (2.0 * eps));
    an.push_back(m.params().grads()[i]);
  }
  EXPECT_LT(rel_err(an, fd), 2e-3);
  EXPECT_GT(rel_err(an, std::vector<double>(an.size(), 0.0)), 0.0);  // not all zero
}

// step() one token at a time gives the full-sequence forward's logits at every position.
TEST_P(CharLmCells, StepMatchesFullForward) {
  const int64_t V = 7, E = 5, H = 6, T = 9;
  CharLm m(lm_spec(GetParam(), V, E, H, 2));
  Rng rng(8);
  m.init(rng);
  std::vector<float> x = random_ids(rng, T, V);
  Arena arena;
  Tensor full = ModelPass(m, arena, false).forward(Tensor(x.data(), {1, T}));
  ASSERT_EQ(full.shape, (Shape{1, T, V}));
  CharLmState state = m.initial_state();
  std::vector<float> stepped(T * V);
  for (int64_t t = 0; t < T; ++t) m.step(static_cast<int64_t>(x[t]), state, stepped.data() + t * V);
  std::vector<float> f(full.f32(), full.f32() + full.numel());
  EXPECT_LT(rel_err(stepped, f), 1e-5);
}

// The other RNN paths the trainer can select (oneDNN kernels, gradient checkpointing) give the
// fused path's logits and gradients, input gradient (into the embedding) included.
TEST_P(CharLmCells, OnednnAndGradCheckpointMatchTheFusedPath) {
  const int64_t V = 8, E = 5, H = 6, B = 3, T = 7;
  Rng rng(9);
  std::vector<float> x = random_ids(rng, B * T, V);
  std::vector<int64_t> y = as_i64(random_ids(rng, B * T, V));
  CharLm ref(lm_spec(GetParam(), V, E, H, 2));
  ref.init(rng);
  const double ref_loss = lm_loss(ref, x, y, B, T, true);
  std::vector<float> ref_grads(ref.params().grads(), ref.params().grads() + ref.params().size());
  for (int variant = 0; variant < 2; ++variant) {
    ModelSpec s = lm_spec(GetParam(), V, E, H, 2);
    if (variant == 0) s.rnn_impl = "onednn";
    else s.grad_checkpoint = true;
    CharLm m(s);
    std::copy(ref.params().params(), ref.params().params() + ref.params().size(), m.params().params());
    EXPECT_NEAR(lm_loss(m, x, y, B, T, true), ref_loss, 1e-5 * std::abs(ref_loss)) << variant;
    std::vector<float> g(m.params().grads(), m.params().grads() + m.params().size());
    EXPECT_LT(rel_err(g, ref_grads), 1e-5) << variant;
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, CharLmCells, ::testing::Values("char_lstm", "char_gru"));

struct LmParityCase { const char* cell; int64_t layers; };
class CharLmTorchParity : public ::testing::TestWithParam<LmParityCase> {};

// Same weights, same batch: logits, the loss and every gradient within 1e-5 of PyTorch's.
TEST_P(CharLmTorchParity, LogitsLossAndEveryGradient) {
  SEQTRAIN_REQUIRE_TORCH();
  const LmParityCase c = GetParam();
  const int64_t V = 11, E = 6, H = 12, B = 4, T = 10;
  CharLm m(lm_spec(std::string("char_") + c.cell, V, E, H, c.layers));
  Rng rng(21);
  m.init(rng);
  std::vector<float> x = random_ids(rng, B * T, V);
  std::vector<int64_t> y = as_i64(random_ids(rng, B * T, V));
  TempDir dir;
  save_params(dir / "model.safetensors", m.params());
  write_npy(dir / "x.npy", as_i64(x), {B, T});
  write_npy(dir / "y.npy", y, {B, T});
  Arena arena;
  Tensor logits = ModelPass(m, arena, true).forward(Tensor(x.data(), {B, T}));
  Tensor target(y.data(), {B, T}, DType::i64);
  const float loss = loss_forward(LossKind::cross_entropy, logits, target);
  Tensor d = arena.tensor(logits.shape);
  loss_backward(LossKind::cross_entropy, logits, target, d);
  m.params().zero_grad();
  ModelPass(m, arena, true).backward(d);

  ASSERT_EQ(run_python("char_lm_ref.py", dir.path.string() + " grad " + c.cell + " " + std::to_string(V) + " " +
                                             std::to_string(E) + " " + std::to_string(H) + " " + std::to_string(c.layers)),
            0);
  std::vector<float> lv(logits.f32(), logits.f32() + logits.numel());
  EXPECT_LT(rel_err(lv, read_npy(dir / "logits.npy")), 1e-5);
  const double ref_loss = read_npy(dir / "loss.npy").at(0);
  EXPECT_LT(std::abs(loss - ref_loss) / std::abs(ref_loss), 1e-5);
  SafetensorsFile grads = read_safetensors(dir / "grads.safetensors");
  ASSERT_EQ(grads.tensors.size(), m.params().entries().size());
  for (size_t i = 0; i < m.params().entries().size(); ++i) {
    const auto& e = m.params().entries()[i];
    const NamedTensor& ref = grads.at(e.name);
    ASSERT_EQ(ref.shape, e.shape) << e.name;
    std::vector<double> r(ref.numel());
    std::memcpy(r.data(), ref.bytes.data(), r.size() * sizeof(double));
    Tensor g = m.params().grad(i);
    std::vector<float> gv(g.f32(), g.f32() + g.numel());
    EXPECT_LT(rel_err(gv, r), 1e-5) << e.name;
  }
}

// PyTorch-initialised weights -> seqtrain: same logits; seqtrain's weights -> PyTorch (strict
// load_state_dict): same logits.
TEST_P(CharLmTorchParity, WeightsRoundTripBothWays) {
  SEQTRAIN_REQUIRE_TORCH();
  const LmParityCase c = GetParam();
  const int64_t V = 9, E = 4, H = 8, B = 3, T = 9;
  const std::string args = std::string(c.cell) + " " + std::to_string(V) + " " + std::to_string(E) + " " +
                           std::to_string(H) + " " + std::to_string(c.layers);
  TempDir dir;
  ASSERT_EQ(run_python("char_lm_ref.py", dir.path.string() + " from_torch " + args), 0);
  CharLm m(lm_spec(std::string("char_") + c.cell, V, E, H, c.layers));
  load_params(dir / "model.safetensors", m.params());
  std::vector<double> xd = read_npy(dir / "x.npy");
  std::vector<float> x(xd.begin(), xd.end());
  ASSERT_EQ(static_cast<int64_t>(x.size()), B * T);
  auto logits = [&] {
    Arena arena;
    Tensor l = ModelPass(m, arena, false).forward(Tensor(x.data(), {B, T}));
    return std::vector<float>(l.f32(), l.f32() + l.numel());
  };
  EXPECT_LT(rel_err(logits(), read_npy(dir / "logits_torch.npy")), 1e-5);
  Rng rng(3);
  m.init(rng);
  save_params(dir / "model.safetensors", m.params());
  ASSERT_EQ(run_python("char_lm_ref.py", dir.path.string() + " from_seqtrain " + args), 0);
  EXPECT_LT(rel_err(logits(), read_npy(dir / "logits_torch.npy")), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cells, CharLmTorchParity,
                         ::testing::Values(LmParityCase{"lstm", 1}, LmParityCase{"lstm", 2}, LmParityCase{"gru", 1},
                                           LmParityCase{"gru", 2}),
                         [](const auto& info) { return std::string(info.param.cell) + "_l" + std::to_string(info.param.layers); });

TEST(CharLmErrors, BadTokenIdsNameTheIdAndTheVocabularySize) {
  CharLm m(lm_spec("char_gru", 6, 3, 4, 1));
  Rng rng(1);
  m.init(rng);
  auto run = [&](float bad) {
    std::vector<float> x{0, 1, 2, bad};
    Arena arena;
    return error_of([&] { ModelPass(m, arena, false).forward(Tensor(x.data(), {2, 2})); });
  };
  std::string e = run(6);
  EXPECT_CONTAINS(e, "token id 6");
  EXPECT_CONTAINS(e, "vocabulary of 6 ids");
  EXPECT_CONTAINS(e, "batch 1 position 1");
  e = run(-1);
  EXPECT_CONTAINS(e, "token id -1");
  EXPECT_CONTAINS(e, "vocabulary of 6 ids");
  EXPECT_CONTAINS(run(1.5f), "not a token id");
  EXPECT_CONTAINS(run(1e30f), "outside the vocabulary of 6 ids");
  EXPECT_EQ(run(5), "<no error>");
  CharLmState s = m.initial_state();
  std::vector<float> logits(6);
  EXPECT_CONTAINS(error_of([&] { m.step(9, s, logits.data()); }), "token id 9 is outside the vocabulary of 6");
}

TEST(CharLmErrors, BidirectionalAndMissingVocabularyAreRefused) {
  ModelSpec s = lm_spec("char_lstm", 5, 3, 4, 1);
  s.bidirectional = true;
  EXPECT_CONTAINS(error_of([&] { make_model(s); }), "model.bidirectional");
  EXPECT_CONTAINS(error_of([&] { make_model(lm_spec("char_lstm", 0, 3, 4, 1)); }), "needs a vocabulary");
}

// make_model builds a CharLm and lends its RNN layers the caller's tuner exactly when the spec
// asks for autotuning: a training pass then records the layer's decision there.
TEST(CharLmErrors, MakeModelBuildsItAndLendsTheTunerToItsLayers) {
  EXPECT_NE(dynamic_cast<CharLm*>(make_model(lm_spec("char_gru", 5, 3, 4, 1)).get()), nullptr);
  for (bool autotune : {false, true}) {
    ModelSpec s = lm_spec("char_lstm", 5, 3, 4, 1);
    s.autotune = autotune;
    auto tuner = std::make_shared<Autotuner>([](const std::string&, const TuneCandidate&) { return 1.0; });
    auto m = make_model(s, ModelEnv{tuner});
    std::vector<float> ids{0, 1, 2, 3, 4, 0};
    Arena arena;
    ModelPass(*m, arena, true).forward(Tensor(ids.data(), {2, 3}));
    EXPECT_EQ(tuner->decisions().size(), autotune ? 1u : 0u) << "autotune " << autotune;
  }
}

// A checkpoint directory of a tiny char LSTM trained on "abcabc...", written as a run would
// (save_checkpoint + vocab.json). Built once: training takes a few hundred small steps.
struct PatternCheckpoint {
  TempDir dir;
  std::string ckpt;
  PatternCheckpoint() {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "abc";
    Vocab vocab = Vocab::chars(decode_utf8(text, "<test>"));
    const int64_t V = vocab.size(), B = 8, T = 12;
    CharLm m(lm_spec("char_lstm", V, 8, 16, 1));
    Rng rng(5);
    m.init(rng);
    std::vector<int32_t> ids = vocab.encode(text);
    auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 0.03});
    auto sched = make_schedule(ScheduleOptions{.base_lr = 0.03});
    TrainStep step(m, *opt, *sched, StepOptions{LossKind::cross_entropy, {}, 1.0, 1});
    std::vector<float> x(B * T);
    std::vector<int64_t> y(B * T);
    for (int s = 0; s < 150; ++s) {
      for (int64_t b = 0; b < B; ++b) {
        const int64_t start = (s * 7 + b * 5) % (static_cast<int64_t>(ids.size()) - T - 1);
        for (int64_t t = 0; t < T; ++t) {
          x[b * T + t] = static_cast<float>(ids[start + t]);
          y[b * T + t] = ids[start + t + 1];
        }
      }
      step.run(Tensor(x.data(), {B, T}), Tensor(y.data(), {B, T}, DType::i64), s);
    }
    final_loss = step.take_loss();
    ckpt = dir / "ckpt";
    CheckpointData data;
    data.params = &m.params();
    data.state = nlohmann::json{{"step", 150}};
    save_checkpoint(ckpt, data);
    vocab.save(ckpt + "/vocab.json");
  }
  double final_loss = 0;
};

PatternCheckpoint& pattern() {
  static PatternCheckpoint p;
  return p;
}

TEST(CharLmGenerate, GreedyContinuesTheTrainedPattern) {
  PatternCheckpoint& p = pattern();
  LoadedGenerator l = load_generator(p.ckpt);
  EXPECT_EQ(l.model->spec().type, "char_lstm");
  EXPECT_EQ(l.model->spec().hidden, 16);
  GenerateArgs a;
  a.prompt = "abcab";
  a.tokens = 10;
  a.temperature = 0;
  EXPECT_EQ(generate_text(*l.model, l.vocab, a), "abcabcabcabcabc");
  a.prompt = "b";
  EXPECT_EQ(generate_text(*l.model, l.vocab, a), "bcabcabcabc");
  // Sampling: the same seed gives the same text; top-k 1 is greedy.
  a.temperature = 1.0;
  a.seed = 4;
  EXPECT_EQ(generate_text(*l.model, l.vocab, a), generate_text(*l.model, l.vocab, a));
  a.top_k = 1;
  EXPECT_EQ(generate_text(*l.model, l.vocab, a), "bcabcabcabc");
  a.prompt = "ab\xff";
  const std::string e = error_of([&] { generate_text(*l.model, l.vocab, a); });
  EXPECT_CONTAINS(e, "--prompt");
  EXPECT_CONTAINS(e, "byte 2");
}

// A model that favours <unk> above every character: generation never draws it from a char
// vocabulary (it would print U+FFFD), greedy or sampled, with or without top-k; a byte vocabulary
// has no <unk>, and its id 0 (the NUL byte) stays drawable.
struct UnkFavouringGenerator : TextGenerator {
  int64_t V;
  explicit UnkFavouringGenerator(int64_t v) : V(v) {}
  int64_t vocab_size() const override { return V; }
  std::unique_ptr<GenState> begin() const override { return std::make_unique<GenState>(); }
  void next_logits(GenState&, int64_t, float* logits) override {
    for (int64_t i = 0; i < V; ++i) logits[i] = 0.f;
    logits[0] = 20.f;  // <unk> (char) / NUL (byte)
    logits[2] = 1.f;
  }
};

TEST(CharLmGenerate, NeverDrawsUnknownFromACharVocabulary) {
  const Vocab vocab = Vocab::chars(U"abc");
  UnkFavouringGenerator g(vocab.size());
  GenerateArgs a;
  a.prompt = "a";
  a.tokens = 40;
  for (double temperature : {0.0, 1.0, 5.0})
    for (int64_t top_k : {0, 1, 2}) {
      a.temperature = temperature;
      a.top_k = top_k;
      const std::string text = generate_text(g, vocab, a);
      EXPECT_EQ(text.find("\xEF\xBF\xBD"), std::string::npos) << temperature << " top-k " << top_k << ": " << text;
      EXPECT_EQ(text.size(), 41u);
      if (temperature == 0 || top_k == 1) {
        EXPECT_EQ(text, "a" + std::string(40, 'b'));  // id 2: 'b'
      }
    }
  UnkFavouringGenerator bytes(256);
  a.temperature = 0;
  a.top_k = 0;
  EXPECT_EQ(generate_text(bytes, Vocab::bytes(), a), "a" + std::string(40, '\0'));
}

TEST(CharLmGenerate, CommandPrintsTheContinuationAndReportsUnknownCharacters) {
  PatternCheckpoint& p = pattern();
  Result r = run_seqtrain("generate " + p.ckpt + " --prompt abca --tokens 8 --temperature 0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "abcabcabcabc\n");
  r = run_seqtrain("generate " + p.ckpt + " --prompt xyab --tokens 3 --temperature 0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "2 character(s) of the prompt are not in the model's vocabulary");
  EXPECT_CONTAINS(r.out, "xyab");
  // A run directory means its checkpoints/best.
  TempDir run;
  fs::create_directories(run.path / "checkpoints");
  fs::copy(p.ckpt, run / "checkpoints/best", fs::copy_options::recursive);
  r = run_seqtrain("generate " + run.path.string() + " --prompt c --tokens 5 --temperature 0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "cabcab\n");
}

TEST(CharLmGenerate, ErrorPathsExitNonZeroWithAClearMessage) {
  PatternCheckpoint& p = pattern();
  Result r = run_seqtrain("generate " + p.ckpt + " --prompt ''");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "--prompt is empty");
  r = run_seqtrain("generate " + p.ckpt + " --prompt ab --temperature -1");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "--temperature -1 is invalid");
  r = run_seqtrain("generate " + p.ckpt + " --prompt ab --top-k -2");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "--top-k -2 is invalid");
  // A checkpoint without its vocabulary.
  TempDir d;
  fs::copy(p.ckpt, d / "ck", fs::copy_options::recursive);
  fs::remove(d / "ck/vocab.json");
  r = run_seqtrain("generate " + (d / "ck") + " --prompt ab");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "vocab.json is missing");
  // A vocabulary of another size than the model's.
  Vocab::chars(U"abcdefg").save(d / "ck/vocab.json");
  r = run_seqtrain("generate " + (d / "ck") + " --prompt ab");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "belongs to another model");
  r = run_seqtrain("generate " + (d / "nothing") + " --prompt ab");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "neither a checkpoint directory");
}

}  // namespace
}  // namespace seqtrain::testing
