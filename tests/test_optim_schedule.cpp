// Learning-rate schedules against torch.optim.lr_scheduler (tests/py/optim_sched_ref.py):
// StepLR, ReduceLROnPlateau on metric sequences, and the warmup + cosine formula both in
// closed form here and through torch's LambdaLR. Also state round trips for resume.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "optim/schedule.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

// Every value within `tol` relative of its own reference (learning rates span decades, so a
// max-normalised error would not see the small ones).
void expect_each_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::abs(got[i] - want[i]), tol * std::abs(want[i])) << "index " << i << ": " << got[i] << " vs " << want[i];
}

std::vector<double> torch_lrs(const std::string& args, const std::vector<double>* metrics = nullptr) {
  TempDir dir;
  if (metrics) write_npy(dir / "metrics.npy", *metrics, {int64_t(metrics->size())});
  EXPECT_EQ(run_python("optim_sched_ref.py", dir.path.string() + " " + args), 0);
  return read_npy(dir / "lrs.npy");
}

std::vector<double> lrs_for_steps(const LrSchedule& s, int64_t steps) {
  std::vector<double> out;
  for (int64_t k = 0; k < steps; ++k) out.push_back(s.lr(k));
  return out;
}

// The lr after each observe(), as torch reports it after each ReduceLROnPlateau.step().
std::vector<double> lrs_for_metrics(LrSchedule& s, const std::vector<double>& metrics) {
  std::vector<double> out;
  for (double m : metrics) {
    s.observe(m);
    out.push_back(s.lr(0));
  }
  return out;
}

TEST(OptimSchedule, ConstantIsConstant) {
  ScheduleOptions o;
  o.base_lr = 3e-4;
  auto s = make_schedule(o);
  EXPECT_EQ(s->name(), "constant");
  EXPECT_EQ(s->lr(0), 3e-4);
  EXPECT_EQ(s->lr(123456), 3e-4);
  s->observe(1.0);  // ignored
  EXPECT_EQ(s->lr(5), 3e-4);
}

TEST(OptimSchedule, StepMatchesTorchStepLR) {
  SEQTRAIN_REQUIRE_TORCH();
  ScheduleOptions o;
  o.name = "step";
  o.base_lr = 0.1;
  o.step_size = 7;
  o.gamma = 0.5;
  auto s = make_schedule(o);
  std::vector<double> mine = lrs_for_steps(*s, 60);
  expect_each_close(mine, torch_lrs("--kind step --base_lr 0.1 --step_size 7 --gamma 0.5 --steps 60"), 1e-12);
  EXPECT_EQ(mine[6], 0.1);
  EXPECT_EQ(mine[7], 0.05);
  EXPECT_DOUBLE_EQ(mine[59], 0.1 * std::pow(0.5, 8));
}

TEST(OptimSchedule, CosineMatchesClosedForm) {
  ScheduleOptions o;
  o.name = "cosine";
  o.base_lr = 1e-2;
  o.min_lr = 1e-4;
  o.warmup_steps = 10;
  o.total_steps = 110;
  auto s = make_schedule(o);
  // Warmup: base * (step + 1) / 10.
  EXPECT_DOUBLE_EQ(s->lr(0), 1e-3);
  EXPECT_DOUBLE_EQ(s->lr(4), 5e-3);
  EXPECT_DOUBLE_EQ(s->lr(9), 1e-2);
  // Cosine over the remaining 100 steps: full rate at 10, midpoint at 60, floor from 110 on.
  EXPECT_DOUBLE_EQ(s->lr(10), 1e-2);
  EXPECT_NEAR(s->lr(60), (1e-2 + 1e-4) / 2, 1e-15);
  EXPECT_NEAR(s->lr(35), 1e-4 + (1e-2 - 1e-4) * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-15);
  EXPECT_DOUBLE_EQ(s->lr(110), 1e-4);
  EXPECT_DOUBLE_EQ(s->lr(100000), 1e-4);
  for (int64_t k = 10; k < 120; ++k) EXPECT_LE(s->lr(k + 1), s->lr(k)) << "not monotone at " << k;

  o.warmup_steps = 0;  // no warmup: the first step already uses the full rate
  EXPECT_DOUBLE_EQ(make_schedule(o)->lr(0), 1e-2);
}

TEST(OptimSchedule, CosineMatchesTorchLambdaLR) {
  SEQTRAIN_REQUIRE_TORCH();
  ScheduleOptions o;
  o.name = "cosine";
  o.base_lr = 3e-3;
  o.min_lr = 1e-5;
  o.warmup_steps = 17;
  o.total_steps = 200;
  auto s = make_schedule(o);
  expect_each_close(lrs_for_steps(*s, 230),
                    torch_lrs("--kind cosine --base_lr 3e-3 --min_lr 1e-5 --warmup 17 --total 200 --steps 230"), 1e-12);
}

// A noisy descent that stalls twice for longer than the default patience of 10, then a
// few tiny (below-threshold) improvements that must still count as bad epochs.
std::vector<double> plateau_metrics() {
  std::vector<double> m;
  double v = 1.0;
  for (int i = 0; i < 8; ++i) m.push_back(v *= 0.9);
  for (int i = 0; i < 14; ++i) m.push_back(v * (1.0 + 0.01 * (i % 3)));
  for (int i = 0; i < 5; ++i) m.push_back(v *= 0.8);
  for (int i = 0; i < 13; ++i) m.push_back(v * (1.0 - 1e-6 * i));  // below the 1e-4 rel threshold
  for (int i = 0; i < 12; ++i) m.push_back(v * 1.5);
  return m;
}

TEST(OptimSchedule, PlateauMatchesTorchDefaults) {
  SEQTRAIN_REQUIRE_TORCH();
  ScheduleOptions o;
  o.name = "plateau";
  o.base_lr = 0.1;
  auto s = make_schedule(o);
  std::vector<double> metrics = plateau_metrics();
  std::vector<double> mine = lrs_for_metrics(*s, metrics);
  expect_each_close(mine, torch_lrs("--kind plateau --base_lr 0.1", &metrics), 1e-12);
  EXPECT_NEAR(mine.back(), 1e-4, 1e-16);  // three reductions: the test exercises the logic
}

TEST(OptimSchedule, PlateauMatchesTorchCustom) {
  SEQTRAIN_REQUIRE_TORCH();
  ScheduleOptions o;
  o.name = "plateau";
  o.base_lr = 0.5;
  o.mode = "max";
  o.threshold_mode = "abs";
  o.threshold = 0.01;
  o.factor = 0.5;
  o.patience = 2;
  o.cooldown = 2;
  o.min_lr = 0.05;
  auto s = make_schedule(o);
  // An accuracy that rises, stalls, has a NaN evaluation, rises by less than the threshold.
  std::vector<double> metrics = {0.1, 0.2, 0.3, 0.3, 0.29, 0.3, 0.305, std::numeric_limits<double>::quiet_NaN(),
                                 0.4, 0.4, 0.4, 0.405, 0.4, 0.41, 0.42, 0.43, 0.2, 0.2, 0.2, 0.2, 0.2,
                                 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2};
  std::vector<double> mine = lrs_for_metrics(*s, metrics);
  expect_each_close(mine, torch_lrs("--kind plateau --base_lr 0.5 --plateau_args mode=max,threshold_mode=abs,"
                                    "threshold=0.01,factor=0.5,patience=2,cooldown=2,min_lr=0.05", &metrics),
                    1e-12);
  EXPECT_EQ(mine.back(), 0.05);  // reached the floor
}

TEST(OptimSchedule, PlateauResumeThroughJsonIsIdentical) {
  ScheduleOptions o;
  o.name = "plateau";
  o.base_lr = 0.1;
  o.patience = 3;
  o.cooldown = 1;
  std::vector<double> metrics = plateau_metrics();
  auto whole = make_schedule(o);
  std::vector<double> straight = lrs_for_metrics(*whole, metrics);

  for (size_t split : {size_t{0}, size_t{5}, size_t{11}, size_t{30}}) {
    auto first = make_schedule(o);
    std::vector<double> got;
    for (size_t i = 0; i < split; ++i) { first->observe(metrics[i]); got.push_back(first->lr(0)); }
    // Through text, as state.json would carry it; `best` is +inf before the first metric.
    std::string text = schedule_state_to_json(first->state()).dump();
    auto second = make_schedule(o);
    second->load_state(schedule_state_from_json(nlohmann::json::parse(text)));
    for (size_t i = split; i < metrics.size(); ++i) { second->observe(metrics[i]); got.push_back(second->lr(0)); }
    EXPECT_EQ(got, straight) << "split at " << split;
  }
  // Sanity: the state really matters (a fresh schedule at the split would not agree).
  auto fresh = make_schedule(o);
  std::vector<double> tail(metrics.begin() + 30, metrics.end());
  std::vector<double> fresh_lrs = lrs_for_metrics(*fresh, tail);
  EXPECT_NE(fresh_lrs, std::vector<double>(straight.begin() + 30, straight.end()));
}

TEST(OptimSchedule, StateJsonKeepsNonFiniteValues) {
  ScheduleState s{"plateau", {{"best", std::numeric_limits<double>::infinity()},
                              {"worst", -std::numeric_limits<double>::infinity()},
                              {"odd", std::numeric_limits<double>::quiet_NaN()},
                              {"lr", 0.25}}};
  ScheduleState back = schedule_state_from_json(nlohmann::json::parse(schedule_state_to_json(s).dump()));
  EXPECT_EQ(back.name, "plateau");
  EXPECT_EQ(back.values.at("best"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(back.values.at("worst"), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(back.values.at("odd")));
  EXPECT_EQ(back.values.at("lr"), 0.25);
  EXPECT_THROW(schedule_state_from_json(nlohmann::json::parse(R"({"name": "plateau", "values": {"lr": "x"}})")), Error);
  EXPECT_THROW(schedule_state_from_json(nlohmann::json::parse("[1, 2]")), Error);
}

TEST(OptimSchedule, PureSchedulesRoundTripAndCheckName) {
  ScheduleOptions o;
  o.name = "cosine";
  o.total_steps = 100;
  auto cos = make_schedule(o);
  ScheduleState st = cos->state();
  EXPECT_EQ(st.name, "cosine");
  EXPECT_TRUE(st.values.empty());
  EXPECT_NO_THROW(make_schedule(o)->load_state(st));
  ScheduleOptions p;
  p.name = "plateau";
  EXPECT_THROW(make_schedule(p)->load_state(st), Error);  // cosine state into plateau
  ScheduleState partial{"plateau", {{"lr", 0.1}}};
  EXPECT_THROW(make_schedule(p)->load_state(partial), Error);
}

TEST(OptimSchedule, RejectsBadOptions) {
  auto bad = [](auto edit) {
    ScheduleOptions o;
    edit(o);
    return o;
  };
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "linear"; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.base_lr = -1; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "step"; o.step_size = 0; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "cosine"; o.total_steps = 0; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "cosine"; o.total_steps = 5; o.warmup_steps = 6; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "cosine"; o.total_steps = 5; o.min_lr = 1; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "plateau"; o.factor = 1.0; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "plateau"; o.mode = "minimum"; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "plateau"; o.threshold_mode = "pct"; })), Error);
  EXPECT_THROW(make_schedule(bad([](ScheduleOptions& o) { o.name = "plateau"; o.patience = -1; })), Error);
  EXPECT_THROW(make_schedule(ScheduleOptions{})->lr(-1), Error);
}

}  // namespace
}  // namespace seqtrain::testing
