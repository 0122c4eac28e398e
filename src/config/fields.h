// The config schema: one list of every public key with its field, type and allowed range.
// Loading, writing (to_yaml) and the list of valid keys all walk this one list, so a key
// added here is parsed, validated, written and suggested without touching anything else.
// Keys of one section must stay contiguous, with sub-sections after the section's own keys:
// to_yaml opens each section once, in the order met here.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/sources.h"
#include "models/registry.h"

namespace seqtrain::config_detail {

// A closed or open interval for numeric keys; describe() turns it into the
// "expected ..." half of an error message.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;

  bool contains(double v) const {
    if (lo_open ? !(v > lo) : !(v >= lo)) return false;
    if (hi_open ? !(v < hi) : !(v <= hi)) return false;
    return true;
  }
};

inline constexpr double kInf = std::numeric_limits<double>::infinity();
// More OpenMP threads than this cannot all be created on common systems (libgomp then crashes),
// and long before it each barrier waits on descheduled threads; data.workers has the same cap.
inline constexpr double kMaxCpuThreads = 256;
inline Range any() { return {}; }
inline Range at_least(double lo) { return {lo, kInf, false, false}; }
inline Range positive() { return {0, kInf, true, false}; }
inline Range unit_right_open() { return {0, 1, false, true}; }   // [0, 1)
inline Range unit_left_open() { return {0, 1, true, false}; }    // (0, 1]
inline Range unit_open() { return {0, 1, true, true}; }          // (0, 1)

using Choices = std::vector<std::string>;

// Calls v.field(key, member, ...) once per key. C is Config or const Config, so the same list
// serves readers and writers. Visitor overloads:
//   field(key, int64_t&, Range)            integer
//   field(key, uint64_t&)                  non-negative integer (seeds)
//   field(key, double&, Range)             finite number
//   field(key, bool&)                      true/false
//   field(key, std::string&, Choices)      one of a fixed set of words
//   field(key, std::string&, PathTag)      a file path (empty allowed)
//   field(key, std::string&, ColumnTag)    one column name (empty allowed)
//   field(key, std::string&, FrequencyTag) N, Nu or Ne
//   field(key, std::string&, NumberOrNone) a finite number or none
//   field(key, int64_t&, CountAtLeastOneOrAuto) integer >= 1 or auto
//   field(key, std::string&, BytesOrAuto)  a byte size or auto
//   field(key, std::string&, EndTag)       empty, a non-zero integer, or a date / date-time
//   field(key, std::vector<std::string>&)  list of column names
//   field(key, std::vector<int64_t>&, Range)  list of distinct integers, each in the range
//   field(key, std::vector<int64_t>&, SizeList)  non-empty list of integers >= 1, repeats allowed
//   field(key, std::vector<double>&, Range)   list of increasing numbers, each in the range
//   field(key, std::array<double, 3>&)     split fractions
//   field(key, std::vector<std::string>&, PrefixMap)  "from=to" prefix pairs
//   field(key, std::vector<std::string>&, NameList)   tensor names or prefixes
//   field(key, std::vector<ParamGroup>&)   parameter groups: a list of {prefix, lr_scale, weight_decay, frozen}
struct PathTag {};
// One column name (data.time_column); empty allowed.
struct ColumnTag {};
// A count that may also be the word auto (data.workers): kept as text, validated on load.
struct CountOrAuto {};
// An integer >= 1 or the word auto, held as kAutoBatch (train.batch_size).
struct CountAtLeastOneOrAuto {};
// Bytes with an optional unit (512MiB, 8GiB, 1e9), or the word auto (runtime.memory_limit): kept
// as text, validated on load (config/scalar.h's parse_bytes).
struct BytesOrAuto {};
// A number, or the word none (data.npy.pad_value): kept as text, validated on load.
struct NumberOrNone {};
// Where the data ends (data.end): empty, a row count N or -N, or a date / date-time; kept as
// text, validated on load.
struct EndTag {};
// How often, in updates or epochs (config/frequency.h): kept as text, validated on load.
struct FrequencyTag {};
// A list of "from=to" prefix pairs (model.init_from_map); a file may also write it as a
// mapping {from: to}. Kept as the "from=to" strings.
struct PrefixMap {};
// A list of tensor names or name prefixes (model.init_from_skip).
struct NameList {};
// A non-empty list of sizes, each an integer >= 1, repeats allowed (model.kernel_sizes).
struct SizeList {};

template <typename C, typename V>
void visit_fields(C& c, V&& v) {
  v.field("seed", c.seed);

  auto& d = c.data;
  v.field("data.source", d.source, data_source_names());  // the registry's (data/sources.h)
  v.field("data.path", d.path, PathTag{});
  v.field("data.features", d.features);
  v.field("data.targets", d.targets);
  v.field("data.lookback", d.lookback, at_least(1));
  v.field("data.horizon", d.horizon, at_least(1));
  v.field("data.stride", d.stride, at_least(1));
  v.field("data.split", d.split);
  v.field("data.normalize", d.normalize, Choices{"zscore", "minmax", "none"});
  v.field("data.nan_policy", d.nan_policy, Choices{"error", "drop", "ffill"});
  v.field("data.seasons", d.seasons, at_least(2));
  v.field("data.time_column", d.time_column, ColumnTag{});
  v.field("data.calendar", d.calendar);
  v.field("data.future_features", d.future_features);
  v.field("data.series_id", d.series_id, ColumnTag{});
  v.field("data.normalize_scope", d.normalize_scope, Choices{"global", "series"});
  v.field("data.static_features", d.static_features);
  v.field("data.end", d.end, EndTag{});
  v.field("data.vocab", d.vocab, Choices{"char", "byte"});
  v.field("data.block_size", d.block_size, at_least(1));
  v.field("data.sampling", d.sampling, Choices{"windows", "random"});
  v.field("data.samples_per_epoch", d.samples_per_epoch, at_least(0));
  v.field("data.synthetic.rows", d.synthetic.rows, at_least(1));
  v.field("data.synthetic.seed", d.synthetic.seed);
  v.field("data.synthetic.noise", d.synthetic.noise, at_least(0));
  v.field("data.synthetic.cells", d.synthetic.cells, at_least(0));
  v.field("data.workers", d.workers, CountOrAuto{});
  v.field("data.prefetch", d.prefetch, at_least(1));
  v.field("data.cache", d.cache, PathTag{});
  v.field("data.cache_epochs", d.cache_epochs, at_least(1));
  v.field("data.augment.jitter_sigma", d.augment.jitter_sigma, at_least(0));
  v.field("data.augment.scale_sigma", d.augment.scale_sigma, at_least(0));
  v.field("data.augment.warp_sigma", d.augment.warp_sigma, at_least(0));
  v.field("data.augment.warp_knots", d.augment.warp_knots, at_least(1));
  v.field("data.augment.shift_max", d.augment.shift_max, at_least(0));
  v.field("data.augment.mask_prob", d.augment.mask_prob, unit_right_open());
  v.field("data.augment.mask_width", d.augment.mask_width, at_least(1));
  v.field("data.npy.train_x", d.npy.train_x, PathTag{});
  v.field("data.npy.train_y", d.npy.train_y, PathTag{});
  v.field("data.npy.val_x", d.npy.val_x, PathTag{});
  v.field("data.npy.val_y", d.npy.val_y, PathTag{});
  v.field("data.npy.test_x", d.npy.test_x, PathTag{});
  v.field("data.npy.test_y", d.npy.test_y, PathTag{});
  v.field("data.npy.classes", d.npy.classes, at_least(0));
  v.field("data.npy.target_features", d.npy.target_features, at_least(0));
  v.field("data.npy.train_len", d.npy.train_len, PathTag{});
  v.field("data.npy.val_len", d.npy.val_len, PathTag{});
  v.field("data.npy.test_len", d.npy.test_len, PathTag{});
  v.field("data.npy.pad_value", d.npy.pad_value, NumberOrNone{});

  auto& m = c.model;
  v.field("model.type", m.type, model_type_names());  // the registry's (models/registry.h)
  v.field("model.hidden", m.hidden, at_least(1));
  v.field("model.layers", m.layers, at_least(1));
  v.field("model.bidirectional", m.bidirectional);
  v.field("model.dropout", m.dropout, unit_right_open());
  v.field("model.embed_size", m.embed_size, at_least(1));
  v.field("model.heads", m.heads, at_least(1));
  v.field("model.bias", m.bias);
  v.field("model.init_from", m.init_from, PathTag{});
  v.field("model.init_from_map", m.init_from_map, PrefixMap{});
  v.field("model.init_from_skip", m.init_from_skip, NameList{});
  v.field("model.init_from_strict", m.init_from_strict);
  v.field("model.encoder_from", m.encoder_from, PathTag{});
  v.field("model.residual_to", m.residual_to, Choices{"none", "last_value", "seasonal_naive"});
  v.field("model.positions", m.positions, Choices{"auto", "learned", "sinusoidal", "none"});
  v.field("model.pooling", m.pooling, Choices{"auto", "last", "mean", "max", "cls"});
  v.field("model.patch_size", m.patch_size, at_least(1));
  v.field("model.kernel_sizes", m.kernel_sizes, SizeList{});
  v.field("model.norm", m.norm, Choices{"layer", "batch"});

  auto& t = c.train;
  v.field("train.epochs", t.epochs, at_least(1));
  v.field("train.max_steps", t.max_steps, at_least(0));
  v.field("train.batch_size", t.batch_size, CountAtLeastOneOrAuto{});
  v.field("train.shuffle", t.shuffle);
  v.field("train.task", t.task, Choices{"auto", "forecast", "classify", "regress", "next_token", "masked_pretrain"});
  v.field("train.freeze_encoder_epochs", t.freeze_encoder_epochs, at_least(0));
  v.field("train.encoder_lr_scale", t.encoder_lr_scale, positive());
  v.field("train.param_groups", t.param_groups);
  v.field("train.loss", t.loss, Choices{"mse", "mae", "huber", "quantile", "cross_entropy"});
  v.field("train.quantiles", t.quantiles, unit_open());
  v.field("train.huber_delta", t.huber_delta, positive());
  v.field("train.grad_clip", t.grad_clip, at_least(0));
  v.field("train.grad_accum", t.grad_accum, at_least(1));
  v.field("train.ema_decay", t.ema_decay, unit_right_open());
  v.field("train.zero", t.zero, Range{0, 1, false, false});
  v.field("train.log_every", t.log_every, at_least(1));
  v.field("train.eval_every", t.eval_every, FrequencyTag{});
  v.field("train.eval_iters", t.eval_iters, at_least(0));
  v.field("train.checkpoint_every", t.checkpoint_every, FrequencyTag{});
  v.field("train.keep_last", t.keep_last, at_least(0));
  v.field("train.grad_checkpoint", t.grad_checkpoint);
  v.field("train.monitor", t.monitor,
          Choices{"val_loss", "val_mae", "val_rmse", "val_mape", "val_smape", "val_mase", "val_accuracy"});
  v.field("train.early_stopping.patience", t.early_stopping.patience, at_least(0));
  v.field("train.early_stopping.min_delta", t.early_stopping.min_delta, at_least(0));
  auto& o = t.optimizer;
  v.field("train.optimizer.name", o.name, Choices{"adamw", "sgd"});
  v.field("train.optimizer.lr", o.lr, positive());
  v.field("train.optimizer.beta1", o.beta1, unit_right_open());
  v.field("train.optimizer.beta2", o.beta2, unit_right_open());
  v.field("train.optimizer.eps", o.eps, positive());
  v.field("train.optimizer.weight_decay", o.weight_decay, at_least(0));
  v.field("train.optimizer.momentum", o.momentum, unit_right_open());
  v.field("train.optimizer.nesterov", o.nesterov);
  v.field("train.optimizer.decay", o.decay, Choices{"all", "2d", "matrices"});
  auto& s = t.schedule;
  v.field("train.schedule.name", s.name, Choices{"constant", "step", "cosine", "plateau"});
  v.field("train.schedule.warmup_steps", s.warmup_steps, at_least(0));
  v.field("train.schedule.step_size", s.step_size, at_least(1));
  v.field("train.schedule.gamma", s.gamma, unit_left_open());
  v.field("train.schedule.min_lr", s.min_lr, at_least(0));
  v.field("train.schedule.factor", s.factor, unit_open());
  v.field("train.schedule.patience", s.patience, at_least(0));
  auto& mk = t.masking;
  v.field("train.masking.strategy", mk.strategy, Choices{"patch", "random", "span"});
  v.field("train.masking.mask_ratio", mk.mask_ratio, unit_open());
  v.field("train.masking.patch_size", mk.patch_size, at_least(1));
  v.field("train.masking.mean_span", mk.mean_span, at_least(1));
  v.field("train.masking.fill", mk.fill, Choices{"token", "zero"});
  v.field("train.masking.std_penalty", mk.std_penalty, at_least(0));

  auto& r = c.runtime;
  v.field("runtime.threads", r.threads, Range{0, kMaxCpuThreads, false, false});
  v.field("runtime.precision", r.precision, Choices{"fp32", "bf16", "fp16", "auto"});
  v.field("runtime.deterministic", r.deterministic);
  v.field("runtime.collective_timeout_s", r.collective_timeout_s, Range{1, kInf, false, false});
  v.field("runtime.rnn_impl", r.rnn_impl, Choices{"fused", "onednn"});
  v.field("runtime.autotune", r.autotune);
  v.field("runtime.backend", r.backend, Choices{"cpu", "reference"});
  // A GPU by index up to 8 per machine (a listed word keeps the error's did-you-mean).
  v.field("runtime.device", r.device,
          Choices{"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7"});
  v.field("runtime.profile", r.profile, at_least(0));
  v.field("runtime.tensorboard", r.tensorboard);
  v.field("runtime.memory_limit", r.memory_limit, BytesOrAuto{});
  v.field("runtime.cuda_graphs", r.cuda_graphs, Choices{"auto", "off"});
  v.field("runtime.loss_scale.init", r.loss_scale.init, positive());
  v.field("runtime.loss_scale.growth_factor", r.loss_scale.growth_factor, Range{1, kInf, true, false});
  v.field("runtime.loss_scale.backoff_factor", r.loss_scale.backoff_factor, unit_open());
  v.field("runtime.loss_scale.growth_interval", r.loss_scale.growth_interval, at_least(1));
}

// "data.synthetic.rows" -> "data.synthetic"; "seed" -> "".
inline std::string section_of(const std::string& key) {
  auto dot = key.rfind('.');
  return dot == std::string::npos ? std::string() : key.substr(0, dot);
}

}  // namespace seqtrain::config_detail
