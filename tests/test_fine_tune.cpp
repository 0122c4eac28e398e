// Fine-tuning (train/group_schedule.h): train.freeze_encoder_epochs keeps every encoder weight
// bitwise unchanged through the frozen epochs, then the encoder's first AdamW update has the
// scaled lr and a bias correction from step 1; a run resumed inside the frozen phase, at the
// unfreezing epoch boundary (replaying a frozen micro-batch) or after it ends bit-identical to
// the uninterrupted run; frozen encoders are skipped in backward (forecaster, transformer) with
// the head's gradients unchanged; train.param_groups in the config and its errors.
#include <gtest/gtest.h>

#include <cstring>

#include "config/config.h"
#include "model_pass.h"
#include "stop_at.h"
#include "test_trainer_util.h"
#include "train/checkpoint.h"
#include "train/data_plan.h"
#include "models/encoder.h"
#include "train/group_schedule.h"
#include "train/observer.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

// 15 batches an epoch (an odd count: a grad_accum 2 step spans each epoch boundary).
Config tiny(std::vector<std::string> extra) {
  std::vector<std::string> o = {"data.synthetic.rows=1200", "data.lookback=16", "data.horizon=2", "model.hidden=8",
                                "train.batch_size=64", "train.log_every=3", "runtime.threads=1",
                                "train.early_stopping.patience=0", "runtime.deterministic=true", "train.epochs=3",
                                "train.schedule.name=constant"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config(example_config(), o);
}

std::unique_ptr<Model> model_of(const Config& c) { return make_model(model_spec(c, plan_data(c))); }

// The weights (and optionally the optimizer state) of checkpoint `dir`.
std::vector<float> weights(const Config& c, const std::string& dir, OptimizerState* opt = nullptr) {
  auto m = model_of(c);
  load_checkpoint(dir, m->params(), opt);
  return std::vector<float>(m->params().params(), m->params().params() + m->params().size());
}

bool same_range(const std::vector<float>& a, const std::vector<float>& b, size_t begin, size_t end) {
  return std::memcmp(a.data() + begin, b.data() + begin, (end - begin) * sizeof(float)) == 0;
}

TEST(FineTune, FrozenEpochsKeepTheEncoderThenItLearnsAtTheScaledLr) {
  const double lr = 0.002, scale = 0.25;
  const Config c = tiny({"train.freeze_encoder_epochs=2", "train.encoder_lr_scale=0.25", "train.checkpoint_every=1u",
                         "train.keep_last=0", "train.optimizer.weight_decay=0", "train.eval_every=0"});
  TempDir dir;
  const TrainSummary s = train(c, TrainOptions(dir / "run", false, false, true));
  ASSERT_EQ(s.steps % 3, 0);
  const int64_t per_epoch = s.steps / 3;

  // The weights the run started from (TrainLoop::build_model's initialisation).
  auto init = model_of(c);
  Rng init_rng(c.seed, 1);
  init->init(init_rng);
  const ParamStore& ps = init->params();
  const std::vector<float> w0(ps.params(), ps.params() + ps.size());
  const size_t head = ps.find("head.weight")->offset;  // rnn.* [0, head), head.* [head, end)
  ASSERT_GT(head, 0u);
  for (const ParamEntry& e : ps.entries()) EXPECT_EQ(e.offset < head, is_encoder_tensor(e.name)) << e.name;

  const std::string ck = dir / "run/checkpoints";
  for (int64_t step : {int64_t{1}, per_epoch, 2 * per_epoch}) {
    OptimizerState st;
    const std::vector<float> w = weights(c, ck + "/" + step_tag(step), &st);
    EXPECT_TRUE(same_range(w, w0, 0, head)) << "an encoder weight changed in a frozen epoch (step " << step << ")";
    EXPECT_FALSE(same_range(w, w0, head, ps.size())) << "the head trains";
    for (const auto& [name, buf] : st.buffers)
      for (size_t i = 0; i < head; ++i) ASSERT_EQ(buf[i], 0.f) << name << " of a frozen tensor moved";
    EXPECT_EQ(st.param_steps, (std::vector<StepCount>{{0, head, 0}, {head, ps.size(), step}}));
  }

  // The encoder's first update: AdamW's step 1 moves each element by lr * scale * g / (|g| + eps),
  // i.e. by the scaled lr wherever the gradient is not tiny (a later bias correction would not).
  const std::vector<float> before = weights(c, ck + "/" + step_tag(2 * per_epoch));
  OptimizerState st;
  const std::vector<float> after = weights(c, ck + "/" + step_tag(2 * per_epoch + 1), &st);
  size_t at_lr = 0;
  for (size_t i = 0; i < head; ++i) {
    const double d = std::abs(double(after[i]) - double(before[i]));
    EXPECT_LE(d, lr * scale * 1.001) << "element " << i;
    at_lr += std::abs(d - lr * scale) < 1e-3 * lr * scale;
  }
  EXPECT_GT(at_lr, head * 9 / 10) << "the encoder's first step is lr * encoder_lr_scale";
  EXPECT_EQ(st.param_steps, (std::vector<StepCount>{{0, head, 1}, {head, ps.size(), 2 * per_epoch + 1}}));
}

// Stops inside the frozen epoch, at its end (the checkpoint falls inside a gradient
// accumulation: the resume replays a micro-batch of the frozen epoch) and after the unfreeze.
TEST(FineTune, ResumeAcrossTheUnfreezeIsBitIdentical) {
  const Config c = tiny({"train.freeze_encoder_epochs=1", "train.encoder_lr_scale=0.5", "train.grad_accum=2",
                         "train.log_every=1"});
  TempDir dir;
  const TrainSummary full = train(c, TrainOptions(dir / "full", false, false, true));
  const std::string full_last = slurp(dir / "full/checkpoints/last/model.safetensors");
  struct Cut { int64_t update, epoch; };
  for (const Cut cut : {Cut{3, -1}, Cut{-1, 0}, Cut{10, -1}}) {
    const std::string run = dir / ("cut" + std::to_string(cut.update) + "_" + std::to_string(cut.epoch));
    ASSERT_EQ(train_stopped_at(c, run, cut.update, cut.epoch).stopped_by, "stop_token");
    const nlohmann::json st = read_checkpoint_state(run + "/checkpoints/last");
    if (cut.epoch == 0) {
      ASSERT_EQ(st.at("micro_steps").get<int64_t>() % 2, 1) << "the checkpoint must fall inside an accumulation";
      ASSERT_EQ(st.at("epoch"), 1);
    }
    const TrainSummary resumed = train(c, TrainOptions(run, true, false, true));
    EXPECT_EQ(resumed.steps, full.steps);
    EXPECT_EQ(resumed.best_val, full.best_val);
    EXPECT_EQ(timeless(read_metrics(run + "/metrics.jsonl")), timeless(read_metrics(dir / "full/metrics.jsonl")))
        << "stopped at update " << cut.update << " / epoch " << cut.epoch;
    EXPECT_EQ(slurp(run + "/checkpoints/last/model.safetensors"), full_last);
  }
}

TEST(FineTune, ErrorsNameTheKeys) {
  TempDir dir;
  auto message = [&](const Config& c) {
    try {
      train(c, TrainOptions(dir / "run", false, true, true));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string m = message(tiny({"train.epochs=2", "train.freeze_encoder_epochs=3"}));
  EXPECT_NE(m.find("train.freeze_encoder_epochs"), std::string::npos) << m;
  EXPECT_NE(m.find("train.epochs"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(dir / "run/config.yaml")) << "refused before the run directory is written";

  m = message(tiny({"train.param_groups=[{prefix: encoder., lr_scale: 0.1}]"}));
  EXPECT_NE(m.find("train.param_groups"), std::string::npos) << m;
  EXPECT_NE(m.find("'encoder.'"), std::string::npos) << m;
  EXPECT_NE(m.find("rnn."), std::string::npos) << m;

  // A model without a head: a GPT (transformer.*, its lm_head tied to the embedding).
  ModelSpec gpt;
  gpt.type = "gpt";
  gpt.vocab_size = 11;
  gpt.hidden = 8;
  gpt.heads = 2;
  gpt.layers = 1;
  gpt.lookback = 8;
  auto model = make_model(gpt);
  TrainConfig t;
  t.freeze_encoder_epochs = 1;
  try {
    GroupSchedule(t, model->params());
    FAIL() << "a model with no head cannot freeze its encoder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.freeze_encoder_epochs"), std::string::npos) << e.what();
  }
  t.freeze_encoder_epochs = 0;
  t.encoder_lr_scale = 0.5;
  EXPECT_THROW(GroupSchedule(t, model->params()), Error);
  t.encoder_lr_scale = 1.0;
  EXPECT_NO_THROW(GroupSchedule(t, model->params()));
}

TEST(FineTune, ParamGroupsConfigRoundTripsAndRefusesBadGroups) {
  const Config c = tiny({"train.param_groups=[{prefix: rnn., lr_scale: 0.1, weight_decay: 0}, {prefix: head., "
                         "frozen: true}]"});
  ASSERT_EQ(c.train.param_groups.size(), 2u);
  EXPECT_EQ(c.train.param_groups[0], (ParamGroup{"rnn.", 0.1, 0.0, false}));
  EXPECT_EQ(c.train.param_groups[1], (ParamGroup{"head.", 1.0, std::nullopt, true}));
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("param_groups: [{prefix: \"rnn.\", lr_scale: 0.1, weight_decay: 0, frozen: false}, "
                      "{prefix: \"head.\", lr_scale: 1, frozen: true}]"), std::string::npos) << yaml;
  EXPECT_EQ(load_config_text(yaml, "resolved", "", {}).train.param_groups, c.train.param_groups);
  EXPECT_NE(config_hash(c), config_hash(tiny({})));

  auto message = [](const std::string& value) {
    try {
      tiny({"train.param_groups=" + value});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("[{prefix: rnn., lr_scal: 0.1}]").find("did you mean 'lr_scale'"), std::string::npos)
      << message("[{prefix: rnn., lr_scal: 0.1}]");
  EXPECT_NE(message("[{lr_scale: 0.1}]").find("no prefix"), std::string::npos);
  EXPECT_NE(message("[{prefix: rnn., lr_scale: -1}]").find("lr_scale"), std::string::npos);
  EXPECT_NE(message("[{prefix: rnn.}, {prefix: rnn.}]").find("two groups"), std::string::npos);
  EXPECT_NE(message("rnn.").find("train.param_groups"), std::string::npos);
}

// With the encoder frozen its backward is skipped: its gradients stay zero and the head's are the
// same bits as in the full backward.
void expect_frozen_encoder_skipped(ModelSpec spec) {
  auto model = make_model(spec);
  Rng rng(3);
  model->init(rng);
  ParamStore& ps = model->params();
  std::vector<float> x(static_cast<size_t>(4 * spec.lookback * spec.input_size));
  for (float& v : x) v = rng.normal();
  auto grads = [&](bool frozen) {
    for (size_t i = 0; i < ps.entries().size(); ++i) ps.set_frozen(i, frozen && is_encoder_tensor(ps.entries()[i].name));
    ps.zero_grad();
    Arena arena;
    ModelPass pass(*model, arena, /*training=*/true);
    const Tensor y = pass.forward(Tensor(x.data(), {4, spec.lookback, spec.input_size}));
    std::vector<float> dy(static_cast<size_t>(y.numel()));
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.1f * float(i % 7) - 0.3f;
    pass.backward(Tensor(dy.data(), y.shape));
    return std::vector<float>(ps.grads(), ps.grads() + ps.size());
  };
  const std::vector<float> all = grads(false), head_only = grads(true);
  for (const ParamEntry& e : ps.entries()) {
    const size_t n = static_cast<size_t>(numel_of(e.shape));
    if (is_encoder_tensor(e.name)) {
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(head_only[e.offset + i], 0.f) << e.name;
      EXPECT_FALSE(same_range(all, head_only, e.offset, e.offset + n)) << e.name << " has a gradient when trained";
    } else {
      EXPECT_TRUE(same_range(all, head_only, e.offset, e.offset + n)) << e.name;
    }
  }
}

TEST(FineTune, FrozenEncoderBackwardIsSkippedForecaster) {
  ModelSpec s;
  s.type = "lstm";
  s.input_size = 3;
  s.lookback = 6;
  s.hidden = 8;
  s.layers = 2;
  s.output_size = 2;
  expect_frozen_encoder_skipped(s);
}

TEST(FineTune, FrozenEncoderBackwardIsSkippedTransformer) {
  ModelSpec s;
  s.type = "transformer";
  s.input_size = 3;
  s.lookback = 6;
  s.hidden = 8;
  s.heads = 2;
  s.layers = 2;
  s.output_size = 2;
  s.pooling = "cls";
  expect_frozen_encoder_skipped(s);
}

}  // namespace
}  // namespace seqtrain::testing
