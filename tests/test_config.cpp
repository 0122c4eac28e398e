// Config loading: defaults, every value kind, overrides, the canonical YAML round trip, and
// that every kind of bad input names the file:line:col (or override) and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "config/config.h"
#include "config/scalar.h"
#include "config/suggest.h"
#include "core/error.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::TempDir;

using testing::error_of;
using testing::write_file;

// Loads `yaml` written to cfg.yaml in a fresh directory; returns the error message.
std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  TempDir dir;
  std::string path = write_file(dir, "cfg.yaml", yaml);
  return error_of([&] { load_config(path, overrides); });
}

TEST(ConfigLoad, EmptyFileGivesDefaults) {
  TempDir dir;
  Config c = load_config(write_file(dir, "empty.yaml", ""));
  EXPECT_EQ(c, Config{});
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.data.source, "synthetic");
  EXPECT_EQ(c.data.lookback, 64);
  EXPECT_EQ(c.data.split, (std::array<double, 3>{0.8, 0.1, 0.1}));
  EXPECT_EQ(c.data.targets, std::vector<std::string>{"voltage"});
  EXPECT_EQ(c.train.optimizer.name, "adamw");
  EXPECT_DOUBLE_EQ(c.train.optimizer.lr, 1e-3);
  EXPECT_EQ(c.runtime.threads, 0);
  EXPECT_EQ(load_config(""), Config{});
}

TEST(ConfigLoad, ReadsEveryKindOfValue) {
  TempDir dir;
  std::string path = write_file(dir, "job.yaml", R"(
seed: 42
data:
  source: csv
  path: series.csv
  features: [a, "b c"]
  targets: [a]
  lookback: 12
  horizon: 3
  stride: 2
  split: [0.7, 0.2, 0.1]
  normalize: minmax
  nan_policy: ffill
  synthetic:
    rows: 500
    noise: 0.5
model:
  type: gru
  hidden: 32
  layers: 2
  bidirectional: yes
  dropout: 0.25
train:
  epochs: 3
  max_steps: 1e4
  shuffle: false
  loss: huber
  huber_delta: 0.5
  early_stopping: {patience: 4, min_delta: 1e-4}
  optimizer:
    name: sgd
    lr: 3e-4
    momentum: 0.9
    nesterov: true
  schedule:
    name: cosine
    warmup_steps: 100
runtime:
  threads: 2
  precision: bf16
  deterministic: true
)");
  Config c = load_config(path);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.data.source, "csv");
  EXPECT_EQ(c.data.path, (dir.path / "series.csv").string());  // relative to the config file
  EXPECT_EQ(c.data.features, (std::vector<std::string>{"a", "b c"}));
  EXPECT_EQ(c.data.targets, std::vector<std::string>{"a"});
  EXPECT_EQ(c.data.lookback, 12);
  EXPECT_EQ(c.data.horizon, 3);
  EXPECT_EQ(c.data.stride, 2);
  EXPECT_EQ(c.data.split, (std::array<double, 3>{0.7, 0.2, 0.1}));
  EXPECT_EQ(c.data.normalize, "minmax");
  EXPECT_EQ(c.data.nan_policy, "ffill");
  EXPECT_EQ(c.data.synthetic.rows, 500);
  EXPECT_EQ(c.data.synthetic.noise, 0.5);
  EXPECT_EQ(c.model.type, "gru");
  EXPECT_EQ(c.model.hidden, 32);
  EXPECT_EQ(c.model.layers, 2);
  EXPECT_TRUE(c.model.bidirectional);
  EXPECT_EQ(c.model.dropout, 0.25);
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.max_steps, 10000);
  EXPECT_FALSE(c.train.shuffle);
  EXPECT_EQ(c.train.loss, "huber");
  EXPECT_EQ(c.train.huber_delta, 0.5);
  EXPECT_EQ(c.train.early_stopping.patience, 4);
  EXPECT_EQ(c.train.early_stopping.min_delta, 1e-4);
  EXPECT_EQ(c.train.optimizer.name, "sgd");
  EXPECT_EQ(c.train.optimizer.lr, 3e-4);
  EXPECT_EQ(c.train.optimizer.momentum, 0.9);
  EXPECT_TRUE(c.train.optimizer.nesterov);
  EXPECT_EQ(c.train.schedule.name, "cosine");
  EXPECT_EQ(c.train.schedule.warmup_steps, 100);
  EXPECT_EQ(c.runtime.threads, 2);
  EXPECT_EQ(c.runtime.precision, "bf16");
  EXPECT_TRUE(c.runtime.deterministic);
  // Untouched keys keep their defaults.
  EXPECT_EQ(c.train.batch_size, Config{}.train.batch_size);
}

TEST(ConfigLoad, EmptySectionAndAbsolutePathAreFine) {
  TempDir dir;
  Config c = load_config(write_file(dir, "c.yaml", "train:\ndata:\n  path: /abs/x.csv\n"));
  EXPECT_EQ(c.train, Config{}.train);
  EXPECT_EQ(c.data.path, "/abs/x.csv");
}

TEST(ConfigErrors, UnknownKeySuggestsClosestKey) {
  std::string m = load_error("train:\n  epochs: 2\n  batchsize: 4\n");
  EXPECT_CONTAINS(m, "cfg.yaml:3:3");
  EXPECT_CONTAINS(m, "unknown config key 'train.batchsize'");
  EXPECT_CONTAINS(m, "did you mean 'train.batch_size'?");
  EXPECT_CONTAINS(m, "'grad_accum'");  // lists the section's valid keys
}

TEST(ConfigErrors, KeyAtWrongLevelFindsItsHome) {
  std::string m = load_error("seed: 1\nbatch_size: 4\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:1");
  EXPECT_CONTAINS(m, "'batch_size'");
  EXPECT_CONTAINS(m, "did you mean 'train.batch_size'?");
  m = load_error("train:\n  lr: 0.1\n");
  EXPECT_CONTAINS(m, "did you mean 'train.optimizer.lr'?");
}

TEST(ConfigErrors, UnknownSectionIsAnError) {
  std::string m = load_error("modle:\n  hidden: 3\n");
  EXPECT_CONTAINS(m, "cfg.yaml:1:1");
  EXPECT_CONTAINS(m, "did you mean 'model'?");
}

TEST(ConfigErrors, WrongTypeNamesKeyPositionAndExpectation) {
  std::string m = load_error("data:\n  lookback: \"abc\"\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:13");
  EXPECT_CONTAINS(m, "data.lookback");
  EXPECT_CONTAINS(m, "an integer >= 1");
  EXPECT_CONTAINS(m, "'abc'");
  m = load_error("data:\n  lookback: 2.5\n");
  EXPECT_CONTAINS(m, "data.lookback");
  m = load_error("model:\n  bidirectional: maybe\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:18");
  EXPECT_CONTAINS(m, "true or false");
  m = load_error("data:\n  targets: {a: 1}\n");
  EXPECT_CONTAINS(m, "data.targets");
  EXPECT_CONTAINS(m, "got a mapping");
}

TEST(ConfigErrors, OutOfRangeNumbers) {
  std::string m = load_error("data:\n  lookback: 0\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:13");
  EXPECT_CONTAINS(m, "an integer >= 1, got '0'");
  m = load_error("train:\n  batch_size: -8\n");
  EXPECT_CONTAINS(m, "train.batch_size");
  m = load_error("train:\n  optimizer:\n    lr: -0.1\n");
  EXPECT_CONTAINS(m, "cfg.yaml:3:9");
  EXPECT_CONTAINS(m, "train.optimizer.lr' expects a number > 0");
  m = load_error("model:\n  dropout: 1\n");
  EXPECT_CONTAINS(m, "a number in [0, 1)");
  m = load_error("train:\n  optimizer:\n    lr: .nan\n");
  EXPECT_CONTAINS(m, "train.optimizer.lr");
  m = load_error("seed: -1\n");
  EXPECT_CONTAINS(m, "'seed' expects a non-negative integer");
}

TEST(ConfigErrors, ChoiceTypoSuggestsValue) {
  std::string m = load_error("train:\n  loss: hubber\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:9");
  EXPECT_CONTAINS(m, "train.loss");
  EXPECT_CONTAINS(m, "'mse', 'mae', 'huber'");
  EXPECT_CONTAINS(m, "did you mean 'huber'?");
}

TEST(ConfigErrors, SplitFractionsChecked) {
  std::string m = load_error("data:\n  split: [0.8, 0.3, 0.1]\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:10");
  EXPECT_CONTAINS(m, "data.split");
  EXPECT_CONTAINS(m, "at most 1");
  m = load_error("data:\n  split: [0, 0.5, 0.5]\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:10");
  EXPECT_CONTAINS(m, "train split");
  m = load_error("data:\n  split: [0.8, 0.2]\n");
  EXPECT_CONTAINS(m, "three fractions");
  m = load_error("data:\n  split: [0.8, x, 0.1]\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:16");
  EXPECT_CONTAINS(m, "item 1");
  // Summing to less than 1 is fine (the remaining rows are unused).
  EXPECT_EQ(load_error("data:\n  split: [0.5, 0.2, 0.1]\n"), "<no error>");
}

TEST(ConfigErrors, YamlSyntaxErrorHasPosition) {
  std::string m = load_error("data:\n  lookback: [1, 2\ntrain:\n  epochs: 1\n");
  EXPECT_CONTAINS(m, "cfg.yaml:");
  EXPECT_CONTAINS(m, "YAML syntax error");
  m = load_error("data:\n  lookback: 3\n bad_indent: 1\n");
  EXPECT_CONTAINS(m, "cfg.yaml:3:");
}

TEST(ConfigErrors, StructuralMistakes) {
  std::string m = load_error("train: 5\n");
  EXPECT_CONTAINS(m, "cfg.yaml:1:1");
  EXPECT_CONTAINS(m, "'train' is a section");
  m = load_error("train:\n  epochs: 1\n  epochs: 2\n");
  EXPECT_CONTAINS(m, "cfg.yaml:3:3");
  EXPECT_CONTAINS(m, "appears twice");
  m = load_error("- a\n- b\n");
  EXPECT_CONTAINS(m, "cfg.yaml:1:1");
  EXPECT_CONTAINS(m, "mapping");
  m = load_error("data:\n  features: [a, a]\n");
  EXPECT_CONTAINS(m, "data.features");
  EXPECT_CONTAINS(m, "twice");
}

TEST(ConfigErrors, CrossKeyChecksNameTheKey) {
  std::string m = load_error("data:\n  source: csv\n");
  EXPECT_CONTAINS(m, "data.path");
  EXPECT_CONTAINS(m, "(default value)");
  m = load_error("data:\n  split: [0.9, 0, 0.1]\ntrain:\n  early_stopping:\n    patience: 3\n");
  EXPECT_CONTAINS(m, "cfg.yaml:5:15");
  EXPECT_CONTAINS(m, "train.early_stopping.patience");
  m = load_error("data:\n  targets: []\n");
  EXPECT_CONTAINS(m, "cfg.yaml:2:12");
  EXPECT_CONTAINS(m, "data.targets");
  m = load_error("train:\n  optimizer: {name: sgd, nesterov: true}\n");
  EXPECT_CONTAINS(m, "train.optimizer.nesterov");
}

TEST(ConfigErrors, NpyCrossKeyChecksNameTheKey) {
  std::string m = load_error("data:\n  source: npy\n");
  EXPECT_CONTAINS(m, "data.npy.train_x");
  m = load_error("data:\n  source: npy\n  npy: {train_x: x.npy}\n");
  EXPECT_CONTAINS(m, "data.npy.train_y");
  m = load_error("data:\n  source: npy\n  npy: {train_x: x.npy, train_y: y.npy, val_y: vy.npy}\n");
  EXPECT_CONTAINS(m, "cfg.yaml:3:");
  EXPECT_CONTAINS(m, "'data.npy.val_y' is set but 'data.npy.val_x' is empty");
  m = load_error("data:\n  source: npy\n  normalize: minmax\n  npy: {train_x: x.npy, train_y: y.npy}\n");
  EXPECT_CONTAINS(m, "data.normalize");
  EXPECT_CONTAINS(m, "minmax");
  // npy validation comes from val_x, not data.split.
  m = load_error("data:\n  source: npy\n  npy: {train_x: x.npy, train_y: y.npy}\ntrain:\n  early_stopping: "
                 "{patience: 2}\n");
  EXPECT_CONTAINS(m, "train.early_stopping.patience");
  EXPECT_EQ(load_error("data:\n  source: npy\n  split: [1, 0, 0]\n  npy: {train_x: x.npy, train_y: y.npy, val_x: "
                       "v.npy, val_y: vy.npy}\ntrain:\n  early_stopping: {patience: 2}\n"),
            "<no error>");
  m = load_error("train:\n  loss: cross_entropy\n");
  EXPECT_CONTAINS(m, "train.loss");
  EXPECT_CONTAINS(m, "data.source npy");
}

TEST(ConfigErrors, MissingFileNamesPath) {
  std::string m = error_of([] { load_config("/nonexistent/dir/job.yaml"); });
  EXPECT_CONTAINS(m, "/nonexistent/dir/job.yaml");
  EXPECT_CONTAINS(m, "cannot read");
  TempDir dir;
  m = error_of([&] { load_config(dir.path.string()); });
  EXPECT_CONTAINS(m, "is a directory");
}

TEST(ConfigOverride, SetsScalarsAndLists) {
  Config c = load_config("", {"train.batch_size=32", "data.split=[0.7, 0.2, 0.1]", "data.features=[voltage,current]",
                              "model.bidirectional=true", "train.optimizer.lr=3e-4", "data.targets=soc",
                              "model.type = gru", "seed=18446744073709551615"});
  EXPECT_EQ(c.train.batch_size, 32);
  EXPECT_EQ(c.data.split, (std::array<double, 3>{0.7, 0.2, 0.1}));
  EXPECT_EQ(c.data.features, (std::vector<std::string>{"voltage", "current"}));
  EXPECT_TRUE(c.model.bidirectional);
  EXPECT_EQ(c.train.optimizer.lr, 3e-4);
  EXPECT_EQ(c.data.targets, std::vector<std::string>{"soc"});
  EXPECT_EQ(c.model.type, "gru");
  EXPECT_EQ(c.seed, 18446744073709551615ull);
}

TEST(ConfigOverride, AppliedAfterTheFileInOrder) {
  TempDir dir;
  std::string path = write_file(dir, "c.yaml", "train:\n  epochs: 5\n  batch_size: 8\n");
  Config c = load_config(path, {"train.epochs=7", "train.epochs=9"});
  EXPECT_EQ(c.train.epochs, 9);
  EXPECT_EQ(c.train.batch_size, 8);
  // An override can repair a cross-key problem the file alone has.
  std::string bad = write_file(dir, "d.yaml", "data:\n  source: csv\n");
  EXPECT_EQ(load_config(bad, {"data.path=/x.csv"}).data.path, "/x.csv");
  // Override paths are relative to the working directory, not the config file.
  EXPECT_EQ(load_config(bad, {"data.path=x.csv"}).data.path, (std::filesystem::current_path() / "x.csv").string());
}

TEST(ConfigOverride, ErrorsNameTheOverride) {
  std::string m = error_of([] { load_config("", {"train.batchsize=3"}); });
  EXPECT_CONTAINS(m, "override 'train.batchsize=3'");
  EXPECT_CONTAINS(m, "did you mean 'train.batch_size'?");
  m = error_of([] { load_config("", {"data.lookback=abc"}); });
  EXPECT_CONTAINS(m, "override 'data.lookback=abc'");
  EXPECT_CONTAINS(m, "data.lookback");
  EXPECT_CONTAINS(m, "an integer >= 1");
  m = error_of([] { load_config("", {"train.epochs"}); });
  EXPECT_CONTAINS(m, "override 'train.epochs'");
  EXPECT_CONTAINS(m, "key=value");
  m = error_of([] { load_config("", {"train=3"}); });
  EXPECT_CONTAINS(m, "'train' is a section");
  m = error_of([] { load_config("", {"data.split=[0.5, 0.2"}); });
  EXPECT_CONTAINS(m, "override 'data.split=[0.5, 0.2'");
  m = error_of([] { load_config("", {"data.split=[0.9, 0.2, 0.1]"}); });
  EXPECT_CONTAINS(m, "override 'data.split=[0.9, 0.2, 0.1]'");
  EXPECT_CONTAINS(m, "at most 1");
}

Config unusual_config() {
  Config c;
  c.seed = 123456789012345ull;
  c.data.source = "csv";
  c.data.path = "/tmp/a dir/with \"quotes\" and: colon #hash.csv";
  c.data.features = {"voltage", "true", "1e3", "null", "x: y", "[odd]"};
  c.data.targets = {"voltage", "[odd]"};
  c.data.lookback = 17;
  c.data.seasons = {12, 5};  // residual_to seasonal_naive needs the longest to fit the lookback
  c.data.time_column = "when: utc";
  c.data.calendar = {"hour", "doy"};
  c.data.future_features = {"true", "cal_hour_sin"};
  c.data.split = {0.7, 0.2, 0.1};
  c.data.synthetic.noise = 0.3;
  c.model.type = "mlp";
  c.model.dropout = 0.1;
  c.model.init_from = "/ckpt/step_10";
  c.model.residual_to = "seasonal_naive";
  c.train.monitor = "val_smape";
  c.train.quantiles = {0.05, 0.5, 0.95};
  c.train.optimizer.lr = 3e-4;
  c.train.optimizer.eps = 1e-12;
  c.train.optimizer.beta2 = 0.98;
  c.train.schedule.name = "step";
  c.train.schedule.gamma = 1.0 / 3.0;  // needs all 17 digits to round-trip
  c.train.grad_clip = 0;
  c.train.eval_every = "250u";
  c.train.eval_iters = 4;
  c.train.checkpoint_every = "3e";
  c.runtime.deterministic = true;
  return c;
}

TEST(ConfigYaml, RoundTripGivesEqualConfig) {
  for (const Config& c : {Config{}, unusual_config()}) {
    std::string text = to_yaml(c);
    Config back = load_config_text(text, "resolved.yaml", "/");
    EXPECT_EQ(back, c) << text;
    EXPECT_EQ(to_yaml(back), text);
  }
  // Through a file as well, the way a run directory's config.yaml is reloaded.
  TempDir dir;
  Config c = unusual_config();
  EXPECT_EQ(load_config(write_file(dir, "config.yaml", to_yaml(c))), c);
}

TEST(ConfigYaml, WritesEveryKeyOnce) {
  std::string text = to_yaml(Config{});
  const auto keys = config_keys();
  EXPECT_EQ(keys.size(), 131u);  // 131 since model.norm; 130 since model.kernel_sizes; 129 since train.ema_decay; 128 since runtime.cuda_graphs; 127 since train.zero; 126 since runtime.collective_timeout_s; 125 since data.series_id, normalize_scope, static_features, end, synthetic.cells; 120 since runtime.profile, runtime.tensorboard, runtime.memory_limit; 117 since train.param_groups; 116 since model.encoder_from, train.freeze_encoder_epochs, encoder_lr_scale, train.masking.*; 107 since data.npy.train_len, val_len, test_len, pad_value, model.positions,
                                // pooling, patch_size, train.task; 99 since data.seasons, time_column, calendar, future_features,
                                // npy.target_features, model.residual_to, train.monitor, quantiles
  int64_t leaf_lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#' && line.back() != ':') ++leaf_lines;
  EXPECT_EQ(leaf_lines, static_cast<int64_t>(keys.size())) << text;
  EXPECT_CONTAINS(text, "data:\n  source: synthetic\n");
  EXPECT_CONTAINS(text, "  split: [0.8, 0.1, 0.1]\n");
  EXPECT_CONTAINS(text, "  synthetic:\n    rows: 20000\n");
  EXPECT_CONTAINS(text, "  early_stopping:\n    patience: 0\n");
  EXPECT_CONTAINS(text, "    lr: 0.001\n");
}

TEST(ConfigYaml, HashIsStableAndSensitive) {
  Config a, b;
  EXPECT_EQ(config_hash(a), config_hash(b));
  EXPECT_EQ(config_hash(a).size(), 16u);
  EXPECT_EQ(config_hash(a).find_first_not_of("0123456789abcdef"), std::string::npos);
  b.train.optimizer.lr = 2e-3;
  EXPECT_NE(config_hash(a), config_hash(b));
  EXPECT_EQ(config_hash(load_config_text(to_yaml(b), "x", "/")), config_hash(b));
}

TEST(ConfigSuggest, EditDistanceAndClosestMatch) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
  EXPECT_EQ(edit_distance("gtp", "gpt"), 1u);  // neighbours swapped: one edit
  EXPECT_EQ(edit_distance("lsmt", "lstm"), 1u);
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // a swap is not edited again (optimal string alignment)
  EXPECT_EQ(did_you_mean("gtp", {"lstm", "gru", "gpt"}), " (did you mean 'gpt'?)");
  std::vector<std::string> keys = {"train.batch_size", "train.epochs", "data.lookback"};
  EXPECT_EQ(closest_match("train.bach_size", keys), "train.batch_size");
  EXPECT_EQ(closest_match("lookback", keys), "data.lookback");
  EXPECT_EQ(closest_match("completely_different", keys), "");
  EXPECT_EQ(did_you_mean("epoch", {"epochs"}), " (did you mean 'epochs'?)");
}

TEST(ConfigScalar, StrictParsing) {
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("+7"), 7);
  EXPECT_EQ(parse_int64("-3"), -3);
  EXPECT_EQ(parse_int64("1e4"), 10000);
  EXPECT_FALSE(parse_int64("12abc"));
  EXPECT_FALSE(parse_int64("2.5"));
  EXPECT_FALSE(parse_int64(""));
  EXPECT_FALSE(parse_int64("99999999999999999999"));
  EXPECT_FALSE(parse_uint64("-1"));
  EXPECT_EQ(parse_uint64("18446744073709551615"), 18446744073709551615ull);
  EXPECT_EQ(parse_double("+1.5"), 1.5);
  EXPECT_EQ(parse_double("-2e-3"), -2e-3);
  EXPECT_FALSE(parse_double("1.5 "));
  EXPECT_FALSE(parse_double("0,5"));
  EXPECT_FALSE(parse_double("1e999"));
  EXPECT_TRUE(std::isnan(*parse_double("nan")));
  EXPECT_EQ(parse_bool("Yes"), true);
  EXPECT_EQ(parse_bool("off"), false);
  EXPECT_FALSE(parse_bool("1"));
}

}  // namespace
}  // namespace seqtrain
