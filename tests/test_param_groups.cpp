// Parameter groups (optim/param_groups.h) in the optimizers: a frozen run's parameters and
// moments stay bitwise untouched (AdamW, SGD); per-group learning rates, weight decays and a
// group frozen for the first steps (then trained: its bias correction starts at step 1) follow
// torch.optim's param groups within 1e-6 (tests/py/optim_step_ref.py --groups); the per-range
// update counts round-trip through the state; resolving groups by prefix and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

// Five tensors' worth of a flat buffer: [0, 40) [40, 100) [100, 130) [130, 200) [200, 256).
const std::vector<size_t> kCuts = {0, 40, 100, 130, 200, 256};

struct Case {
  std::vector<float> p0, grads;  // grads: steps x n
  std::vector<double> lrs;
  size_t n = 256;
  int steps = 20;
};

Case make_case(uint64_t seed) {
  Case c;
  Rng rng(seed);
  c.p0.resize(c.n);
  for (auto& v : c.p0) v = rng.normal();
  c.grads.resize(c.n * c.steps);
  for (int k = 0; k < c.steps; ++k) {
    const float scale = std::pow(10.f, rng.uniform(-2.f, 1.f));
    for (size_t i = 0; i < c.n; ++i) c.grads[k * c.n + i] = scale * rng.normal();
  }
  for (int k = 0; k < c.steps; ++k) c.lrs.push_back(3e-2 * (0.6 + 0.4 * std::cos(0.3 * k)));
  return c;
}

// One group per tensor of kCuts; frozen during steps [frozen_from, frozen_to).
struct Group {
  double lr_scale = 1.0;
  std::optional<double> weight_decay;
  int frozen_from = 0, frozen_to = 0;
};

std::vector<GroupRun> runs_at(const std::vector<Group>& groups, int step) {
  std::vector<GroupRun> runs;
  for (size_t i = 0; i < groups.size(); ++i) {
    const Group& g = groups[i];
    runs.push_back({kCuts[i], kCuts[i + 1], g.lr_scale, g.weight_decay, g.frozen_from <= step && step < g.frozen_to});
  }
  return runs;
}

std::vector<float> run_groups(Optimizer& opt, const Case& c, const std::vector<Group>& groups) {
  std::vector<float> p = c.p0, traj;
  for (int k = 0; k < c.steps; ++k) {
    opt.set_groups(runs_at(groups, k));
    opt.step(p.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
    traj.insert(traj.end(), p.begin(), p.end());
  }
  return traj;
}

void expect_groups_match_torch(const OptimizerOptions& o, const std::string& py_args, const std::vector<Group>& groups) {
  const Case c = make_case(29);
  TempDir dir;
  write_npy(dir / "params0.npy", c.p0, {int64_t(c.n)});
  write_npy(dir / "grads.npy", c.grads, {c.steps, int64_t(c.n)});
  write_npy(dir / "lrs.npy", c.lrs, {c.steps});
  nlohmann::json spec = nlohmann::json::array();
  for (size_t i = 0; i < groups.size(); ++i) {
    const Group& g = groups[i];
    spec.push_back({{"offset", kCuts[i]}, {"n", kCuts[i + 1] - kCuts[i]}, {"lr_scale", g.lr_scale},
                    {"weight_decay", g.weight_decay ? nlohmann::json(*g.weight_decay) : nlohmann::json()},
                    {"frozen_from", g.frozen_from}, {"frozen_to", g.frozen_to}});
  }
  std::ofstream(dir / "groups.json") << spec.dump();
  ASSERT_EQ(run_python("optim_step_ref.py", dir.path.string() + " " + py_args + " --groups " + (dir / "groups.json")), 0);

  auto opt = make_optimizer(o);
  const std::vector<float> traj = run_groups(*opt, c, groups);
  const std::vector<double> ref = read_npy(dir / "params_torch.npy");
  ASSERT_EQ(ref.size(), traj.size());
  for (int k = 0; k < c.steps; ++k) {
    std::vector<float> mine(traj.begin() + k * c.n, traj.begin() + (k + 1) * c.n);
    std::vector<double> theirs(ref.begin() + k * c.n, ref.begin() + (k + 1) * c.n);
    EXPECT_LT(rel_err(mine, theirs), 1e-6) << "parameters differ after step " << k + 1;
  }
  const OptimizerState st = opt->state();
  for (const auto& [name, buf] : st.buffers)
    EXPECT_LT(rel_err(buf, read_npy(dir / ("state_" + name + ".npy"))), 1e-6) << "state buffer " << name;
  if (o.name == "adamw") {  // torch's per-parameter step counts
    const std::vector<double> steps = read_npy(dir / "steps.npy");
    const std::vector<StepCount> mine = opt->param_steps(c.n);
    for (size_t i = 0; i + 1 < kCuts.size(); ++i)
      for (const StepCount& r : mine) {
        if (r.begin <= kCuts[i] && kCuts[i] < r.end) {
          EXPECT_EQ(double(r.steps), steps[i]) << "tensor " << i;
        }
      }
  }
}

// Per-group lr scales and decays, a group frozen for the first 6 steps, one frozen in the middle.
std::vector<Group> mixed_groups() {
  std::vector<Group> g(5);
  g[0].lr_scale = 0.1;
  g[1].weight_decay = 0.0;
  g[2].frozen_to = 6;  // trained from step 6 on: its bias correction starts at 1 there
  g[2].lr_scale = 0.5;
  g[3].frozen_from = 8;
  g[3].frozen_to = 13;
  g[3].weight_decay = 0.2;
  return g;  // g[4]: the optimizer's own settings
}

TEST(ParamGroupsTorch, AdamWGroupsMatchTorch) {
  expect_groups_match_torch(OptimizerOptions{}, "--opt adamw", mixed_groups());
}

TEST(ParamGroupsTorch, AdamWStrongDecayGroupsMatchTorch) {
  OptimizerOptions o;
  o.weight_decay = 0.3;
  expect_groups_match_torch(o, "--opt adamw --weight_decay 0.3", mixed_groups());
}

TEST(ParamGroupsTorch, SGDMomentumGroupsMatchTorch) {
  OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.9;
  o.weight_decay = 0.05;
  // The group frozen first starts its momentum buffer at its first update, as torch does.
  expect_groups_match_torch(o, "--opt sgd --momentum 0.9 --weight_decay 0.05", mixed_groups());
}

// Frozen elements: parameters and every state buffer bitwise as before, across steps, whether the
// run was frozen from the start (moments still zero) or after training.
void expect_frozen_untouched(const OptimizerOptions& o) {
  const Case c = make_case(5);
  auto opt = make_optimizer(o);
  std::vector<float> p = c.p0;
  std::vector<GroupRun> runs = {{0, 100, 1.0, {}, false}, {100, 200, 1.0, {}, true}, {200, 256, 1.0, {}, false}};
  auto step = [&](int k) { opt->step(p.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]); };
  auto same_bits = [](const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; };
  opt->set_groups(runs);
  for (int k = 0; k < 4; ++k) step(k);
  EXPECT_TRUE(same_bits(p.data() + 100, c.p0.data() + 100, 100)) << "frozen from the start";
  EXPECT_FALSE(same_bits(p.data(), c.p0.data(), 100)) << "the others trained";
  for (const auto& [name, buf] : opt->state().buffers)
    for (size_t i = 100; i < 200; ++i) ASSERT_EQ(buf[i], 0.f) << name << " moved at " << i;

  runs[1].frozen = false;  // train it, then freeze the first run
  opt->set_groups(runs);
  step(4);
  runs[0].frozen = true;
  opt->set_groups(runs);
  const std::vector<float> before = p;
  const OptimizerState st_before = opt->state();
  for (int k = 5; k < 9; ++k) step(k);
  EXPECT_TRUE(same_bits(p.data(), before.data(), 100)) << "frozen after training";
  EXPECT_FALSE(same_bits(p.data() + 100, before.data() + 100, 156));
  for (const auto& [name, buf] : opt->state().buffers)
    EXPECT_TRUE(same_bits(buf.data(), st_before.buffers.at(name).data(), 100)) << name;
  EXPECT_EQ(opt->param_steps(c.n), (std::vector<StepCount>{{0, 200, 5}, {200, 256, 9}}));  // equal neighbours merge
}

TEST(ParamGroupsFrozen, AdamWLeavesFrozenRunsBitwise) { expect_frozen_untouched(OptimizerOptions{}); }

TEST(ParamGroupsFrozen, SGDLeavesFrozenRunsBitwise) {
  OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  expect_frozen_untouched(o);
}

// Without groups the update is the one it always was; a single default group is no different.
TEST(ParamGroupsFrozen, DefaultGroupIsBitwiseThePlainOptimizer) {
  const Case c = make_case(8);
  auto plain = make_optimizer(OptimizerOptions{}), grouped = make_optimizer(OptimizerOptions{});
  grouped->set_groups({{0, 100, 1.0, {}, false}, {100, 256, 1.0, {}, false}});
  std::vector<float> a = c.p0, b = c.p0;
  for (int k = 0; k < 5; ++k) {
    plain->step(a.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
    grouped->step(b.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
  }
  EXPECT_EQ(std::memcmp(a.data(), b.data(), c.n * sizeof(float)), 0);
  EXPECT_TRUE(grouped->state().param_steps.empty()) << "no frozen history: nothing extra in a checkpoint";
}

// A resume across an unfreeze: the per-range counts come back with the state, and the continued
// trajectory is bitwise the uninterrupted one; without them it would differ.
TEST(ParamGroupsState, ResumeAcrossUnfreezeIsBitIdentical) {
  const Case c = make_case(12);
  std::vector<Group> groups(5);
  groups[1].frozen_to = 7;
  auto full = make_optimizer(OptimizerOptions{});
  const std::vector<float> ref = run_groups(*full, c, groups);

  auto first = make_optimizer(OptimizerOptions{});
  std::vector<float> p = c.p0;
  for (int k = 0; k < 5; ++k) {
    first->set_groups(runs_at(groups, k));
    first->step(p.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
  }
  const OptimizerState saved = first->state();
  ASSERT_FALSE(saved.param_steps.empty());
  auto resume = [&](bool with_counts) {
    auto second = make_optimizer(OptimizerOptions{});
    OptimizerState s = saved;
    if (!with_counts) s.param_steps.clear();
    second->load_state(s);
    std::vector<float> q = p;
    for (int k = 5; k < c.steps; ++k) {
      second->set_groups(runs_at(groups, k));
      second->step(q.data(), c.grads.data() + k * c.n, c.n, c.lrs[k]);
    }
    return q;
  };
  const std::vector<float> end(ref.end() - c.n, ref.end());
  EXPECT_EQ(std::memcmp(resume(true).data(), end.data(), c.n * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(resume(false).data(), end.data(), c.n * sizeof(float)), 0);
}

TEST(ParamGroupsState, LoadRejectsBadCounts) {
  auto opt = make_optimizer(OptimizerOptions{});
  OptimizerState s;
  s.step = 3;
  s.buffers["exp_avg"].assign(10, 0.f);
  s.buffers["exp_avg_sq"].assign(10, 0.f);
  s.param_steps = {{0, 4, 3}, {5, 10, 1}};  // a gap
  EXPECT_THROW(opt->load_state(s), Error);
  s.param_steps = {{0, 4, 3}, {4, 10, 4}};  // more updates than steps
  EXPECT_THROW(opt->load_state(s), Error);
  s.param_steps = {{0, 4, 3}, {4, 9, 1}};  // short
  EXPECT_THROW(opt->load_state(s), Error);
  s.param_steps = {{0, 4, 3}, {4, 10, 1}};
  EXPECT_NO_THROW(opt->load_state(s));
  EXPECT_THROW(opt->set_groups({{0, 4, 1.0, {}, false}}), Error) << "groups must cover the 10 parameters";
}

// Resolution by prefix on a real model: first match wins, neighbours merge, a dead prefix names
// the key and the model's names.
TEST(ParamGroupsResolve, FirstMatchWinsAndRunsMerge) {
  ModelSpec spec;
  spec.type = "lstm";
  spec.hidden = 8;
  spec.output_size = 3;
  auto model = make_model(spec);
  const ParamStore& ps = model->params();
  const std::vector<ParamGroup> groups = {{"rnn.weight", 0.1, 0.0, false}, {"rnn.", 0.5, {}, false},
                                          {"head.", 1.0, {}, true}};
  const std::vector<ParamGroup> per = entry_groups(ps, groups);
  for (size_t i = 0; i < per.size(); ++i) {
    const std::string& name = ps.entries()[i].name;
    const ParamGroup& want = name.rfind("rnn.weight", 0) == 0 ? groups[0] : name.rfind("rnn.", 0) == 0 ? groups[1] : groups[2];
    EXPECT_EQ(per[i], want) << name;
  }
  const std::vector<GroupRun> runs = group_runs(ps, per);
  ASSERT_EQ(runs.size(), 3u);  // rnn weights, rnn biases, head (weight and bias merged)
  EXPECT_EQ(runs.front().begin, 0u);
  EXPECT_EQ(runs.back().end, ps.size());
  EXPECT_TRUE(runs.back().frozen);

  try {
    entry_groups(ps, std::vector<ParamGroup>{{"encoder.", 1.0, {}, false}});
    FAIL() << "a prefix matching nothing must throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("train.param_groups"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'encoder.'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rnn., head."), std::string::npos) << msg;
  }
}

// ParamStore's frozen flags: all_frozen by prefix, and zero_frozen_grads clears exactly those.
TEST(ParamGroupsResolve, FrozenFlagsAndGradients) {
  ModelSpec spec;
  spec.type = "lstm";
  spec.hidden = 4;
  auto model = make_model(spec);
  ParamStore& ps = model->params();
  EXPECT_FALSE(ps.all_frozen("rnn."));
  apply_frozen(ps, entry_groups(ps, std::vector<ParamGroup>{{"rnn.", 1.0, {}, true}}));
  EXPECT_TRUE(ps.all_frozen("rnn."));
  EXPECT_FALSE(ps.all_frozen("head."));
  EXPECT_TRUE(ps.all_frozen("nothing."));
  std::fill(ps.grads(), ps.grads() + ps.size(), 1.f);
  ps.zero_frozen_grads();
  for (const ParamEntry& e : ps.entries())
    for (int64_t i = 0; i < numel_of(e.shape); ++i)
      ASSERT_EQ(ps.grads()[e.offset + i], e.frozen ? 0.f : 1.f) << e.name;
}

}  // namespace
}  // namespace seqtrain::testing
