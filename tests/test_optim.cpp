// Optimizers and gradient clipping against PyTorch (tests/py/optim_step_ref.py and
// optim_clip_ref.py): every parameter after every step must agree with torch.optim within
// 1e-6 relative. Also: checkpoint state round trips, weight-decay masks, option validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "models/model.h"
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include "test_util.h"

namespace seqtrain::testing {
namespace {

// Random parameters, a sequence of gradients whose scale changes by orders of magnitude from
// step to step (so Adam's second moment matters), a few exact zeros, and a varying lr.
struct OptimCase {
  std::vector<float> params0;
  std::vector<float> grads;  // steps x n
  std::vector<double> lrs;
  size_t n = 0;
  int steps = 0;
};

OptimCase make_case(size_t n, int steps, double base_lr, uint64_t seed) {
  OptimCase c;
  c.n = n;
  c.steps = steps;
  Rng rng(seed);
  c.params0.resize(n);
  for (auto& v : c.params0) v = rng.normal();
  c.grads.resize(n * steps);
  for (int k = 0; k < steps; ++k) {
    const float scale = std::pow(10.f, rng.uniform(-3.f, 1.f));
    for (size_t i = 0; i < n; ++i) c.grads[k * n + i] = (i % 97 == 5) ? 0.f : scale * rng.normal();
  }
  for (int k = 0; k < steps; ++k) c.lrs.push_back(base_lr * (0.55 + 0.45 * std::cos(0.4 * k)));
  return c;
}

// Runs the optimizer over the case, returning the parameters after every step (steps x n).
std::vector<float> run_cpp(Optimizer& opt, const OptimCase& c) {
  std::vector<float> p = c.params0, traj;
  for (int k = 0; k < c.steps; ++k) {
    opt.step(p.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
    traj.insert(traj.end(), p.begin(), p.end());
  }
  return traj;
}

// Runs the same case through torch and compares every step and the final state buffers.
void expect_matches_torch(const OptimizerOptions& o, const std::string& py_args, const OptimCase& c) {
  TempDir dir;
  write_npy(dir / "params0.npy", c.params0, {int64_t(c.n)});
  write_npy(dir / "grads.npy", c.grads, {c.steps, int64_t(c.n)});
  write_npy(dir / "lrs.npy", c.lrs, {c.steps});
  ASSERT_EQ(run_python("optim_step_ref.py", dir.path.string() + " " + py_args), 0);

  auto opt = make_optimizer(o);
  std::vector<float> traj = run_cpp(*opt, c);
  std::vector<double> ref = read_npy(dir / "params_torch.npy");
  ASSERT_EQ(ref.size(), traj.size());
  for (int k = 0; k < c.steps; ++k) {
    std::vector<float> mine(traj.begin() + k * c.n, traj.begin() + (k + 1) * c.n);
    std::vector<double> theirs(ref.begin() + k * c.n, ref.begin() + (k + 1) * c.n);
    EXPECT_LT(rel_err(mine, theirs), 1e-6) << "parameters differ after step " << k + 1;
  }
  // The parameters must really have moved, or agreement would prove nothing.
  std::vector<float> last(traj.end() - c.n, traj.end());
  EXPECT_GT(rel_err(last, c.params0), 1e-3);

  OptimizerState st = opt->state();
  EXPECT_EQ(st.step, c.steps);
  ASSERT_EQ(st.buffers.size(), opt->buffer_names().size());
  for (const auto& [name, buf] : st.buffers) {
    std::vector<double> ref_buf = read_npy(dir / ("state_" + name + ".npy"));
    EXPECT_LT(rel_err(buf, ref_buf), 1e-6) << "state buffer " << name;
  }
}

OptimizerOptions adamw_opts() { return OptimizerOptions{}; }
OptimizerOptions sgd_opts(double momentum, double dampening, bool nesterov, double wd) {
  OptimizerOptions o;
  o.name = "sgd";
  o.momentum = momentum;
  o.dampening = dampening;
  o.nesterov = nesterov;
  o.weight_decay = wd;
  return o;
}

TEST(OptimAdamW, MatchesTorchDefaultDecay) {
  SEQTRAIN_REQUIRE_TORCH();
  // weight_decay left unset: both sides must use torch's default 0.01.
  expect_matches_torch(adamw_opts(), "--opt adamw", make_case(1000, 20, 5e-2, 1));
}

TEST(OptimAdamW, MatchesTorchStrongDecay) {
  SEQTRAIN_REQUIRE_TORCH();
  OptimizerOptions o = adamw_opts();
  o.weight_decay = 0.5;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  expect_matches_torch(o, "--opt adamw --weight_decay 0.5 --beta1 0.8 --beta2 0.95", make_case(1000, 20, 5e-2, 2));
}

TEST(OptimAdamW, MatchesTorchWithoutDecay) {
  SEQTRAIN_REQUIRE_TORCH();
  OptimizerOptions o = adamw_opts();
  o.weight_decay = 0.0;
  o.eps = 1e-4;  // large enough to matter next to sqrt(v) for the small-gradient steps
  expect_matches_torch(o, "--opt adamw --weight_decay 0 --eps 1e-4", make_case(1000, 20, 1e-2, 3));
}

TEST(OptimAdamW, MatchesTorchOnParallelSizedBuffer) {
  SEQTRAIN_REQUIRE_TORCH();
  // Above kOptimParallelMin, so the OpenMP team does the pass.
  OptimizerOptions o = adamw_opts();
  o.weight_decay = 0.1;
  expect_matches_torch(o, "--opt adamw --weight_decay 0.1", make_case(kOptimParallelMin + 4099, 20, 2e-2, 4));
}

TEST(OptimSGD, MatchesTorchPlain) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_matches_torch(sgd_opts(0, 0, false, 0), "--opt sgd", make_case(1000, 20, 1e-2, 5));
}

TEST(OptimSGD, MatchesTorchMomentumDampening) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_matches_torch(sgd_opts(0.9, 0.1, false, 0), "--opt sgd --momentum 0.9 --dampening 0.1",
                       make_case(1000, 20, 1e-2, 6));
}

TEST(OptimSGD, MatchesTorchNesterov) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_matches_torch(sgd_opts(0.9, 0, true, 0), "--opt sgd --momentum 0.9 --nesterov 1",
                       make_case(1000, 20, 1e-2, 7));
}

TEST(OptimSGD, MatchesTorchWeightDecay) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_matches_torch(sgd_opts(0, 0, false, 0.05), "--opt sgd --weight_decay 0.05", make_case(1000, 20, 5e-2, 8));
}

TEST(OptimSGD, MatchesTorchNesterovWeightDecayParallel) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_matches_torch(sgd_opts(0.8, 0, true, 0.01), "--opt sgd --momentum 0.8 --nesterov 1 --weight_decay 0.01",
                       make_case(kOptimParallelMin + 4099, 20, 2e-2, 9));
}

// Stops after `split` steps, copies the state into a fresh optimizer (as a checkpoint and
// resume would), and continues: the result must equal the uninterrupted run bit for bit.
void expect_resume_identical(const OptimizerOptions& o, size_t n) {
  OptimCase c = make_case(n, 20, 1e-2, 11);
  auto whole = make_optimizer(o);
  std::vector<float> straight = run_cpp(*whole, c);

  const int split = 9;
  auto first = make_optimizer(o);
  std::vector<float> p = c.params0;
  for (int k = 0; k < split; ++k) first->step(p.data(), c.grads.data() + k * n, n, c.lrs[k]);
  OptimizerState saved = first->state();
  first.reset();  // nothing survives but the saved copy

  auto second = make_optimizer(o);
  second->load_state(saved);
  EXPECT_EQ(second->step_count(), split);
  for (int k = split; k < c.steps; ++k) second->step(p.data(), c.grads.data() + k * n, n, c.lrs[k]);
  EXPECT_EQ(std::memcmp(p.data(), straight.data() + (c.steps - 1) * n, n * sizeof(float)), 0);
  OptimizerState a = second->state(), b = whole->state();
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.buffers, b.buffers);
}

TEST(OptimState, AdamWResumeIsBitIdentical) {
  OptimizerState s = make_optimizer(adamw_opts())->state();
  EXPECT_EQ(s.step, 0);
  EXPECT_TRUE(s.buffers.empty());
  expect_resume_identical(adamw_opts(), 777);
}

TEST(OptimState, SGDResumeIsBitIdentical) {
  expect_resume_identical(sgd_opts(0.9, 0, true, 1e-3), 777);
  expect_resume_identical(sgd_opts(0.9, 0.2, false, 0), 777);
  expect_resume_identical(sgd_opts(0, 0, false, 1e-3), 777);
}

TEST(OptimState, ResumeWithoutStateWouldDiffer) {
  // The resume test above is only meaningful if the state matters: dropping it must change
  // the result (AdamW's bias correction and moments restart).
  OptimCase c = make_case(100, 4, 1e-2, 12);
  auto a = make_optimizer(adamw_opts());
  std::vector<float> straight = run_cpp(*a, c);
  auto b = make_optimizer(adamw_opts());
  std::vector<float> p = c.params0;
  for (int k = 0; k < 2; ++k) b->step(p.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
  auto fresh = make_optimizer(adamw_opts());
  for (int k = 2; k < 4; ++k) fresh->step(p.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
  EXPECT_NE(std::memcmp(p.data(), straight.data() + 3 * c.n, c.n * sizeof(float)), 0);
}

TEST(OptimState, LoadRejectsMismatchedState) {
  auto adam = make_optimizer(adamw_opts());
  std::vector<float> p(10, 1.f), g(10, 0.5f);
  adam->step(p.data(), g.data(), 10, 1e-3);
  OptimizerState good = adam->state();
  EXPECT_EQ(good.buffers.size(), 2u);
  EXPECT_EQ(good.buffers.at("exp_avg").size(), 10u);

  auto sgd = make_optimizer(sgd_opts(0.9, 0, false, 0));
  EXPECT_THROW(sgd->load_state(good), Error);  // AdamW's buffers in an SGD

  OptimizerState missing = good;
  missing.buffers.erase("exp_avg_sq");
  EXPECT_THROW(adam->load_state(missing), Error);

  OptimizerState ragged = good;
  ragged.buffers["exp_avg"].resize(9);
  EXPECT_THROW(adam->load_state(ragged), Error);

  OptimizerState negative = good;
  negative.step = -1;
  EXPECT_THROW(adam->load_state(negative), Error);

  // A failed load leaves the optimizer as it was.
  EXPECT_EQ(adam->step_count(), 1);
  EXPECT_EQ(adam->state().buffers, good.buffers);

  // State for 10 parameters, then a step over 12.
  auto other = make_optimizer(adamw_opts());
  other->load_state(good);
  std::vector<float> p12(12, 1.f), g12(12, 0.5f);
  EXPECT_THROW(other->step(p12.data(), g12.data(), 12, 1e-3), Error);
  EXPECT_THROW(adam->step(p12.data(), g12.data(), 12, 1e-3), Error);
  EXPECT_THROW(adam->step(p.data(), g.data(), 10, std::numeric_limits<double>::quiet_NaN()), Error);
}

TEST(OptimState, ResetForgetsEverything) {
  auto opt = make_optimizer(adamw_opts());
  std::vector<float> p(8, 1.f), g(8, 0.5f);
  opt->step(p.data(), g.data(), 8, 1e-3);
  opt->reset();
  EXPECT_EQ(opt->step_count(), 0);
  EXPECT_TRUE(opt->state().buffers.empty());
  std::vector<float> p4(4, 1.f), g4(4, 0.5f);
  EXPECT_NO_THROW(opt->step(p4.data(), g4.data(), 4, 1e-3));  // a new size is fine after reset
}

// Elements the mask excludes must follow the no-decay trajectory exactly, the others the
// decayed one.
void expect_mask_splits(OptimizerOptions decayed) {
  OptimizerOptions plain = decayed;
  plain.weight_decay = 0.0;
  OptimCase c = make_case(300, 10, 5e-2, 13);
  std::vector<uint8_t> mask(c.n);
  for (size_t i = 0; i < c.n; ++i) mask[i] = (i / 7) % 2;

  auto with_decay = make_optimizer(decayed);
  auto without = make_optimizer(plain);
  auto masked = make_optimizer(decayed);
  masked->set_decay_mask(mask);
  std::vector<float> a = run_cpp(*with_decay, c), b = run_cpp(*without, c), m = run_cpp(*masked, c);
  size_t last = (c.steps - 1) * c.n, differ = 0;
  for (size_t i = 0; i < c.n; ++i) {
    EXPECT_EQ(m[last + i], mask[i] ? a[last + i] : b[last + i]) << "element " << i;
    differ += a[last + i] != b[last + i];
  }
  EXPECT_GT(differ, c.n / 2);  // decay really changed the trajectory
}

TEST(OptimDecayMask, AdamWSkipsMaskedElements) {
  OptimizerOptions o = adamw_opts();
  o.weight_decay = 0.3;
  expect_mask_splits(o);
}

TEST(OptimDecayMask, SGDSkipsMaskedElements) { expect_mask_splits(sgd_opts(0.9, 0, false, 0.3)); }

TEST(OptimDecayMask, RejectsWrongLength) {
  auto opt = make_optimizer(adamw_opts());
  opt->set_decay_mask(std::vector<uint8_t>(5, 1));
  std::vector<float> p(6, 1.f), g(6, 0.5f);
  EXPECT_THROW(opt->step(p.data(), g.data(), 6, 1e-3), Error);
}

// train.optimizer.decay: matrices on a char LM (embedding, LSTM, head): the model's decay flags
// are nanoGPT's rule, and AdamW with the mask they build follows torch.optim.AdamW with two
// param groups (weight decay on the 2-D+ non-embedding tensors, weight_decay 0 on the rest).
TEST(OptimDecayPolicy, MatricesMatchesTorchWithTwoParamGroups) {
  ModelSpec spec;
  spec.type = "char_lstm";
  spec.vocab_size = 11;
  spec.embed_size = 5;
  spec.hidden = 8;
  spec.decay = "matrices";
  auto model = make_model(spec);
  const ParamStore& ps = model->params();
  nlohmann::json layout = nlohmann::json::array();
  for (const auto& e : ps.entries()) {
    const bool want = e.shape.size() >= 2 && e.name != "embed.weight";
    EXPECT_EQ(e.decay, want) << e.name;
    layout.push_back({e.name, e.offset, e.shape});
  }
  ASSERT_NE(ps.find("embed.weight"), nullptr);
  EXPECT_FALSE(ps.find("embed.weight")->decay);
  EXPECT_TRUE(ps.find("rnn.weight_hh_l0")->decay);
  EXPECT_FALSE(ps.find("rnn.bias_ih_l0")->decay);
  EXPECT_TRUE(ps.find("head.weight")->decay);
  EXPECT_FALSE(ps.find("head.bias")->decay);

  OptimizerOptions o = adamw_opts();
  o.weight_decay = 0.3;
  const OptimCase c = make_case(ps.size(), 12, 5e-2, 17);
  TempDir dir;
  write_npy(dir / "params0.npy", c.params0, {int64_t(c.n)});
  write_npy(dir / "grads.npy", c.grads, {c.steps, int64_t(c.n)});
  write_npy(dir / "lrs.npy", c.lrs, {c.steps});
  std::ofstream(dir / "layout.json") << layout.dump();
  ASSERT_EQ(run_python("optim_step_ref.py", dir.path.string() + " --opt adamw --weight_decay 0.3 --layout " +
                                                (dir / "layout.json")), 0);
  auto masked = make_optimizer(o);
  masked->set_decay_mask(ps.decay_mask());
  const std::vector<float> traj = run_cpp(*masked, c);
  const std::vector<double> ref = read_npy(dir / "params_torch.npy");
  ASSERT_EQ(ref.size(), traj.size());
  for (int k = 0; k < c.steps; ++k) {
    std::vector<float> mine(traj.begin() + k * c.n, traj.begin() + (k + 1) * c.n);
    std::vector<double> theirs(ref.begin() + k * c.n, ref.begin() + (k + 1) * c.n);
    EXPECT_LT(rel_err(mine, theirs), 1e-6) << "parameters differ after step " << k + 1;
  }
  for (const auto& [name, buf] : masked->state().buffers)
    EXPECT_LT(rel_err(buf, read_npy(dir / ("state_" + name + ".npy"))), 1e-6) << name;
  // The mask mattered: decaying everything ends elsewhere.
  auto all = make_optimizer(o);
  const std::vector<float> plain = run_cpp(*all, c);
  EXPECT_GT(rel_err(std::vector<float>(plain.end() - c.n, plain.end()), std::vector<float>(traj.end() - c.n, traj.end())),
            1e-4);
}

// The default policy decays everything, as torch.optim.AdamW(model.parameters()), so its mask
// leaves today's numbers alone; an unknown policy names the config key.
TEST(OptimDecayPolicy, AllIsTheDefaultAndUnknownPoliciesAreRefused) {
  ModelSpec spec;
  spec.type = "char_gru";
  spec.vocab_size = 6;
  auto model = make_model(spec);
  for (const auto& e : model->params().entries()) EXPECT_TRUE(e.decay) << e.name;
  const auto mask = model->params().decay_mask();
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), static_cast<std::ptrdiff_t>(model->params().size()));
  spec.decay = "biases";
  try {
    make_model(spec);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.optimizer.decay"), std::string::npos) << e.what();
  }
}

TEST(OptimFactory, BuildsAndValidates) {
  auto adam = make_optimizer(adamw_opts());
  EXPECT_EQ(adam->name(), "adamw");
  EXPECT_EQ(adam->options().weight_decay.value(), 0.01);
  EXPECT_EQ(adam->buffer_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  auto sgd = make_optimizer(sgd_opts(0.9, 0, false, 0));
  EXPECT_EQ(sgd->name(), "sgd");
  EXPECT_EQ(sgd->buffer_names(), (std::vector<std::string>{"momentum_buffer"}));
  OptimizerOptions sgd_default;
  sgd_default.name = "sgd";
  EXPECT_EQ(make_optimizer(sgd_default)->options().weight_decay.value(), 0.0);
  EXPECT_TRUE(make_optimizer(sgd_default)->buffer_names().empty());

  auto bad = [](auto edit) {
    OptimizerOptions o;
    edit(o);
    return o;
  };
  EXPECT_THROW(make_optimizer(bad([](OptimizerOptions& o) { o.name = "adam"; })), Error);
  EXPECT_THROW(make_optimizer(bad([](OptimizerOptions& o) { o.beta1 = 1.0; })), Error);
  EXPECT_THROW(make_optimizer(bad([](OptimizerOptions& o) { o.beta2 = -0.1; })), Error);
  EXPECT_THROW(make_optimizer(bad([](OptimizerOptions& o) { o.eps = -1; })), Error);
  EXPECT_THROW(make_optimizer(bad([](OptimizerOptions& o) { o.lr = -1; })), Error);
  EXPECT_THROW(make_optimizer(bad([](OptimizerOptions& o) { o.weight_decay = -0.1; })), Error);
  EXPECT_THROW(make_optimizer(sgd_opts(0, 0, true, 0)), Error);      // nesterov without momentum
  EXPECT_THROW(make_optimizer(sgd_opts(0.9, 0.1, true, 0)), Error);  // nesterov with dampening
  EXPECT_THROW(make_optimizer(sgd_opts(-0.5, 0, false, 0)), Error);
  try {
    make_optimizer(bad([](OptimizerOptions& o) { o.name = "adam"; }));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adamw, sgd"), std::string::npos) << e.what();
  }
}

// ---- clipping ----------------------------------------------------------------------------

void expect_clip_matches_torch(std::vector<float> g, double max_norm, bool expect_clipped) {
  TempDir dir;
  write_npy(dir / "grads.npy", g, {int64_t(g.size())});
  // Three "parameters" back to back, as in a model's gradient buffer.
  size_t a = g.size() / 5, b = g.size() / 3;
  std::string sizes = std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(g.size() - a - b);
  ASSERT_EQ(run_python("optim_clip_ref.py", dir.path.string() + " --max_norm " + std::to_string(max_norm) +
                                                " --sizes " + sizes), 0);
  std::vector<float> before = g;
  double norm = clip_grad_norm(g.data(), g.size(), max_norm);
  std::vector<double> ref_norm = read_npy(dir / "norm.npy"), ref = read_npy(dir / "clipped.npy");
  EXPECT_NEAR(norm, ref_norm[0], 1e-6 * ref_norm[0]);
  EXPECT_LT(rel_err(g, ref), 1e-6);
  if (expect_clipped) {
    EXPECT_GT(norm, max_norm);
    EXPECT_NEAR(grad_norm(g.data(), g.size()), max_norm, 1e-5 * max_norm);
  } else {
    EXPECT_LE(norm, max_norm);
    EXPECT_EQ(g, before);  // untouched, bit for bit
  }
}

std::vector<float> random_grads(size_t n, float scale, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> g(n);
  for (auto& v : g) v = scale * rng.normal();
  return g;
}

TEST(OptimClip, MatchesTorchWhenClipping) {
  SEQTRAIN_REQUIRE_TORCH();
  // norm about sqrt(5000) * 2 = 141 against max_norm 1
  expect_clip_matches_torch(random_grads(5000, 2.f, 21), 1.0, true);
}

TEST(OptimClip, MatchesTorchWhenClippingParallelSized) {
  SEQTRAIN_REQUIRE_TORCH();
  expect_clip_matches_torch(random_grads(kOptimParallelMin * 2 + 3, 0.1f, 22), 5.0, true);
}

TEST(OptimClip, MatchesTorchWhenNotClipping) {
  SEQTRAIN_REQUIRE_TORCH();
  // norm about sqrt(5000) * 0.01 = 0.71 against max_norm 1
  expect_clip_matches_torch(random_grads(5000, 0.01f, 23), 1.0, false);
}

TEST(OptimClip, NormIsAccurateInDouble) {
  // One million copies of 0.1f: a float accumulator drifts visibly here, the double one does
  // not (the exact answer is 1000 * 0.1f).
  std::vector<float> g(1000000, 0.1f);
  double expect = 1000.0 * double(0.1f);
  EXPECT_NEAR(grad_norm(g.data(), g.size()), expect, 1e-9 * expect);
  std::vector<float> h = {3.f, 4.f};
  EXPECT_EQ(grad_norm(h.data(), 2), 5.0);
  EXPECT_EQ(grad_norm(nullptr, 0), 0.0);
  // Clip {3,4} to 1: coefficient 1 / (5 + 1e-6).
  EXPECT_EQ(clip_grad_norm(h.data(), 2, 1.0), 5.0);
  EXPECT_FLOAT_EQ(h[0], float(3.0 / (5.0 + 1e-6)));
  EXPECT_FLOAT_EQ(h[1], float(4.0 / (5.0 + 1e-6)));
  // A norm comparable to torch's 1e-6 guard shows it: 5e-6 clipped to 1e-6 gives 1/6, not 1/5.
  std::vector<float> tiny = {3e-6f, 4e-6f};
  double norm = clip_grad_norm(tiny.data(), 2, 1e-6);
  EXPECT_NEAR(norm, 5e-6, 1e-12);
  EXPECT_NEAR(tiny[0], 3e-6 / 6, 1e-12);
  EXPECT_NEAR(tiny[1], 4e-6 / 6, 1e-12);
}

TEST(OptimClip, NonFiniteNormLeavesGradsAlone) {
  std::vector<float> g = random_grads(100, 1.f, 24);
  g[37] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> before = g;
  EXPECT_TRUE(std::isnan(grad_norm(g.data(), g.size())));
  EXPECT_TRUE(std::isnan(clip_grad_norm(g.data(), g.size(), 1.0)));
  EXPECT_EQ(std::memcmp(g.data(), before.data(), g.size() * sizeof(float)), 0);
  g[37] = std::numeric_limits<float>::infinity();
  double n = clip_grad_norm(g.data(), g.size(), 1.0);
  EXPECT_TRUE(std::isinf(n));
  EXPECT_EQ(g[0], before[0]);
}

TEST(OptimClip, RejectsBadMaxNorm) {
  std::vector<float> g = {1.f};
  EXPECT_THROW(clip_grad_norm(g.data(), 1, 0.0), Error);
  EXPECT_THROW(clip_grad_norm(g.data(), 1, -1.0), Error);
  EXPECT_THROW(clip_grad_norm(g.data(), 1, std::numeric_limits<double>::infinity()), Error);
}

TEST(OptimClip, ScaleGradsForAccumulation) {
  // Four micro-batches accumulated unscaled, then scaled by 1/4: the mean gradient.
  std::vector<float> g(kOptimParallelMin + 1);
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(i % 13) * 4.f;
  scale_grads(g.data(), g.size(), 0.25f);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], float(i % 13)) << i;
}

}  // namespace
}  // namespace seqtrain::testing
