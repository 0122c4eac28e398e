// Config: the fully resolved settings of one job (data, model, training, runtime).
// Every public YAML key maps to exactly one field here; the defaults below are the documented
// defaults (docs/CONFIG.md). load_config() reads a YAML file plus "key=value" overrides and
// validates every value, so code downstream can trust the ranges stated next to each field.
// Choices (loss, optimizer, ...) are kept as their YAML spelling because they are validated
// against a fixed list at load time and ModelSpec already speaks strings.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "optim/param_groups.h"

namespace seqtrain {

struct SyntheticConfig {
  int64_t rows = 20000;  // >= 1; rows of the generated battery series
  uint64_t seed = 0;     // the data's own seed, so changing `seed` does not change the data
  double noise = 1.0;    // >= 0; multiplies every measurement-noise level (0 = noiseless)
  // >= 0; a fleet of this many cells (each `rows` rows, its own capacity, resistance and ambient
  // temperature, columns capacity / resistance / ambient added), each its own series; 0 = one cell.
  int64_t cells = 0;
  bool operator==(const SyntheticConfig&) const = default;
};

// Series augmentation, seeded per (seed, epoch, sample); see docs/PIPELINE.md.
struct AugmentConfig {
  double jitter_sigma = 0.0;  // >= 0; gaussian noise added to every value
  double scale_sigma = 0.0;   // >= 0; one multiplicative factor per feature, N(1, sigma)
  double warp_sigma = 0.0;    // >= 0; smooth magnitude warp through warp_knots knots
  int64_t warp_knots = 4;     // >= 1
  int64_t shift_max = 0;      // >= 0; time shift by up to this many steps (edge repeated)
  double mask_prob = 0.0;     // [0, 1); chance a step starts a masked run
  int64_t mask_width = 1;     // >= 1; steps per masked run
  bool operator==(const AugmentConfig&) const = default;
};

// data.source npy: one glob per split and array (several files per split, sorted and
// concatenated); see docs/DATA.md. Globs are made absolute like data.path.
struct NpyConfig {
  std::string train_x, train_y;  // X [N, T, F]; y [N] labels or [N, H(, targets)]; both required
  std::string val_x, val_y;      // optional: empty = no validation
  std::string test_x, test_y;    // optional: empty = no test split
  int64_t classes = 0;           // >= 0; label y: logits per sample; 0 = largest label + 1
  // Regression y: each target's feature index in X (one per target), when the targets' pasts
  // are among the inputs: enables the last-value baseline and MASE in the metrics. Empty = none.
  std::vector<int64_t> target_features;
  // Variable length (a set is a sequence without order): each sample's valid steps as an integer
  // file [N] per X file (glob-paired like X), or the value whose trailing all-features steps are
  // padding ("none" = off). Steps past a sample's length never reach an output or a gradient.
  std::string train_len, val_len, test_len;
  std::string pad_value = "none";  // a number, or none
  bool operator==(const NpyConfig&) const = default;
};

struct DataConfig {
  std::string source = "synthetic";        // csv | synthetic | npy | text
  std::string path;                        // csv or text file; made absolute by load_config
  std::vector<std::string> features;       // input columns; empty = every column of the source
  std::vector<std::string> targets = {"voltage"};  // predicted columns, at least one
  int64_t lookback = 64;                   // >= 1; input time steps per window
  int64_t horizon = 1;                     // >= 1; predicted time steps per window
  int64_t stride = 1;                      // >= 1; rows between consecutive window starts
  std::array<double, 3> split = {0.8, 0.1, 0.1};  // train/val/test fractions, see docs/DATA.md
  std::string normalize = "zscore";        // zscore | minmax | none
  std::string nan_policy = "error";        // error | drop | ffill
  // Periods in rows (each >= 2, e.g. [48, 336] for half-hourly data with daily and weekly
  // cycles): each adds season<m>_sin / season<m>_cos inputs (the phase of the row), and the
  // longest is the seasonal naive's period and MASE's naive lag. Empty = none.
  std::vector<int64_t> seasons;
  // csv: the column holding each row's time (dates, date-times or numbers: data/timestamps.h);
  // it is no input. It phases data.seasons by time (the same in every file), drives
  // data.calendar, and `forecast` writes the future steps' times. Empty = none.
  std::string time_column;
  // Calendar inputs from data.time_column: any of minute, hour, dow, dom, month, doy, each as the
  // sine and cosine of its phase (cal_<part>_sin / _cos).
  std::vector<std::string> calendar;
  // Known-future inputs: features whose values over the horizon are known when forecasting (a
  // planned load, data.seasons' and data.calendar's columns); the model sees them for those
  // steps too. Never a target.
  std::vector<std::string> future_features;
  // A fleet (data/fleet.h): csv's column naming each row's series (a long-format file; empty =
  // the file is one series, or a data.path glob's files are one each).
  std::string series_id;
  // global | series: one set of statistics for every series, or each series' own (fitted on its
  // training rows, inverted on every output and metric).
  std::string normalize_scope = "global";
  // Columns constant within each series (capacity, site); inputs like data.features, scaled
  // globally even with normalize_scope series.
  std::vector<std::string> static_features;
  // Where each series' data ends: "" (all of it), N (its first N rows), -N (all but its last N) or
  // a date / date-time (rows before it; data.time_column): a backtest's refit trains up to an origin.
  std::string end;
  std::string vocab = "char";              // text: char | byte
  int64_t block_size = 64;                 // >= 1; text: tokens per sample (next-token targets)
  // text, training split: windows (every data.stride tokens, each once an epoch) | random
  // (block_size windows at seeded uniform random offsets, nanoGPT's get_batch)
  std::string sampling = "windows";
  int64_t samples_per_epoch = 0;           // >= 0; random: samples an epoch; 0 = train tokens / block_size
  SyntheticConfig synthetic;
  std::string workers = "auto";            // loader threads: an integer >= 0, or auto
  int64_t prefetch = 2;                    // >= 1; ready batches queued per worker
  std::string cache;                       // pre-augmentation cache directory; empty = off
  int64_t cache_epochs = 1;                // >= 1; augmented epochs cached; epoch e reads e % K
  AugmentConfig augment;                   // training split only; all zero = off
  NpyConfig npy;
  bool operator==(const DataConfig&) const = default;
};

struct ModelConfig {
  std::string type = "lstm";   // lstm | gru | mlp | char_lstm | char_gru | gpt | transformer | cnn (models/registry.h)
  int64_t hidden = 64;         // >= 1
  int64_t layers = 1;          // >= 1
  bool bidirectional = false;
  double dropout = 0.0;        // [0, 1)
  int64_t embed_size = 32;     // >= 1; token embedding width of char_lstm / char_gru
  int64_t heads = 4;           // >= 1; attention heads of gpt (must divide hidden)
  bool bias = true;            // gpt: biases in Linear and LayerNorm layers
  std::string init_from;       // checkpoint directory to start from; empty = fresh init
  // "from=to" tensor-name prefix pairs: init_from's tensors named from* fill the model's to*.
  std::vector<std::string> init_from_map;
  std::vector<std::string> init_from_skip;  // model tensor names or prefixes left at their init
  bool init_from_strict = true;  // every model tensor not skipped must be filled, every source tensor used
  // An encoder to start from (a pretraining run's directory or its `export --encoder` file): its
  // tensors fill this model's encoder, the head stays fresh (init_from's map and skip underneath).
  std::string encoder_from;
  // none | last_value | seasonal_naive (data.seasons' longest period): lstm/gru/mlp forecasters
  // predict the correction to that baseline's forecast, so training starts from the baseline.
  std::string residual_to = "none";
  // Encoders (the transformer family; pooling also lstm/gru/cnn): how positions enter (auto |
  // learned | sinusoidal | none; none for sets; auto = the family's own), how a sample's steps become one vector (auto | last | mean | max |
  // cls; last = the last valid step; auto = the family's own: mean for cnn, last elsewhere), and steps per token (transformer: a patch of P steps).
  std::string positions = "auto";
  std::string pooling = "auto";
  int64_t patch_size = 1;      // >= 1
  std::vector<int64_t> kernel_sizes = {8, 5, 3};  // cnn: one conv layer per kernel size, each >= 1
  // cnn: each conv's norm, layer (LayerNorm over the channels at every step) | batch (BatchNorm1d
  // over the channels, statistics of the batch's valid steps; one process only).
  std::string norm = "layer";
  bool operator==(const ModelConfig&) const = default;
};

struct EarlyStoppingConfig {
  int64_t patience = 0;     // >= 0; validations without improvement before stopping; 0 = off
  double min_delta = 0.0;   // >= 0; improvement smaller than this does not count
  bool operator==(const EarlyStoppingConfig&) const = default;
};

struct OptimizerConfig {
  std::string name = "adamw";  // adamw | sgd
  double lr = 1e-3;            // > 0; peak learning rate
  double beta1 = 0.9;          // [0, 1), adamw
  double beta2 = 0.999;        // [0, 1), adamw
  double eps = 1e-8;           // > 0, adamw
  double weight_decay = 0.0;   // >= 0; decoupled for adamw, L2 for sgd
  double momentum = 0.0;       // [0, 1), sgd
  bool nesterov = false;       // sgd; needs momentum > 0
  std::string decay = "all";   // all | 2d | matrices: parameters weight_decay applies to
  bool operator==(const OptimizerConfig&) const = default;
};

struct ScheduleConfig {
  std::string name = "constant";  // constant | step | cosine | plateau
  int64_t warmup_steps = 0;       // >= 0; linear warmup from 0 to lr
  int64_t step_size = 1000;       // >= 1; step: optimizer steps between decays
  double gamma = 0.1;             // (0, 1]; step: lr multiplier per decay
  double min_lr = 0.0;            // >= 0; cosine floor and plateau floor
  double factor = 0.5;            // (0, 1); plateau: lr multiplier on a plateau
  int64_t patience = 5;           // >= 0; plateau: validations without improvement
  bool operator==(const ScheduleConfig&) const = default;
};

// train.masking: how masked pretraining (train.task masked_pretrain) hides the inputs it learns to
// reconstruct (data/masking.h).
struct MaskingConfig {
  std::string strategy = "patch";  // patch | random | span
  double mask_ratio = 0.15;        // (0, 1): the share of valid positions masked
  int64_t patch_size = 8;          // >= 1; patch: consecutive steps masked together
  double mean_span = 3.0;          // >= 1; span: mean masked run per feature
  std::string fill = "token";      // token | zero: what a masked input becomes
  double std_penalty = 0.0;        // >= 0; weight of relu(1 - std) of the encoder output
  bool operator==(const MaskingConfig&) const = default;
};

struct TrainConfig {
  int64_t epochs = 10;            // >= 1
  int64_t max_steps = 0;          // >= 0; optimizer steps cap; 0 = no cap
  // >= 1: windows per micro-batch; or kAutoBatch (written `auto`): the training loop finds the
  // batch (train/batch_finder.h) and the run's config.yaml holds the number it chose.
  int64_t batch_size = 64;
  bool shuffle = true;            // permute training windows each epoch (see epoch_order)
  std::string loss = "mse";       // mse | mae | huber | quantile | cross_entropy (npy labels, text)
  // auto | forecast | classify | regress | next_token | masked_pretrain: what the run predicts; auto
  // infers it from the data as before (labels: classify; text: next_token; otherwise forecast).
  std::string task = "auto";
  // Fine-tuning: epochs with the encoder frozen, then its learning rate scaled.
  int64_t freeze_encoder_epochs = 0;  // >= 0, <= epochs
  double encoder_lr_scale = 1.0;      // > 0
  // torch.optim param groups by tensor-name prefix (optim/param_groups.h); the first group whose
  // prefix matches a tensor is its group. Empty: one group.
  std::vector<ParamGroup> param_groups;
  // loss quantile: the levels forecast (each in (0, 1), increasing); the model gives one forecast
  // per level, never crossing, and the pinball loss trains them.
  std::vector<double> quantiles = {0.1, 0.5, 0.9};
  double huber_delta = 1.0;       // > 0
  double grad_clip = 1.0;         // >= 0; max global gradient L2 norm; 0 = off
  int64_t grad_accum = 1;         // >= 1; micro-batches per optimizer step
  // [0, 1): the decay of an exponential moving average of the weights, updated after every
  // optimizer step, that validation, checkpoints and the test use (optim/ema.h); 0 = off.
  double ema_decay = 0.0;
  // 0 or 1: ZeRO stage 1 under mpirun, AdamW's moments sharded over the ranks
  // (docs/DISTRIBUTED.md); a single process ignores it.
  int64_t zero = 0;
  int64_t log_every = 50;         // >= 1; optimizer steps between train log records
  // Frequencies (config/frequency.h): N or Nu = every N optimizer updates, Ne = every N epochs.
  std::string eval_every = "1e";        // validation passes; 0 = never
  int64_t eval_iters = 0;               // >= 0; batches per validation pass; 0 = the whole split
  std::string checkpoint_every = "0";   // step checkpoints; 0 = one per epoch (as 1e)
  bool grad_checkpoint = false;   // recompute RNN layer state in backward to save activation memory
  int64_t keep_last = 3;          // >= 0; step checkpoints kept; 0 = keep all
  // What early stopping, the best checkpoint and the plateau schedule watch: val_loss, or a
  // forecasting run's val_mae | val_rmse | val_mape | val_smape | val_mase (lower is better), or a
  // classifier's val_accuracy (higher is better).
  std::string monitor = "val_loss";
  EarlyStoppingConfig early_stopping;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  MaskingConfig masking;
  bool operator==(const TrainConfig&) const = default;
};

// Dynamic loss scaling under precision fp16 (optim/loss_scaler.h; torch GradScaler's defaults).
struct LossScaleConfig {
  double init = 65536.0;          // > 0; the starting scale, 2^16
  double growth_factor = 2.0;     // > 1; applied after growth_interval clean steps
  double backoff_factor = 0.5;    // (0, 1); applied on a step with inf/NaN gradients (skipped)
  int64_t growth_interval = 2000; // >= 1; consecutive clean steps before the scale grows
  bool operator==(const LossScaleConfig&) const = default;
};

struct RuntimeConfig {
  int64_t threads = 0;              // >= 0; 0 = all cores
  std::string precision = "fp32";   // fp32 | bf16 | fp16 | auto (bf16 where the CPU has native bf16)
  bool deterministic = false;       // bitwise-repeatable runs at some speed cost
  // Under mpirun: the longest a rank waits inside one collective before it decides another rank
  // died or hung and ends the whole job (dist/watchdog.h); >= 1 second.
  double collective_timeout_s = 300.0;
  std::string rnn_impl = "fused";   // fused | onednn: kernels for the LSTM/GRU layers
  bool autotune = true;             // time the RNN kernels per layer shape at the first step (cudnn.benchmark)
  LossScaleConfig loss_scale;       // used only when precision is fp16
  // cpu | reference: which Backend (backend/backend.h) runs the layers and the optimizer. The
  // reference backend (plain fp64-accumulating loops) is the oracle for tests; fp32 only.
  std::string backend = "cpu";
  // auto | cpu | cuda | cuda:N: where the run computes (backend/cuda_plugin.h). auto (the
  // default, since the CUDA backend's tests and end-to-end checks passed on a GPU: see
  // bench/device/check.sh) takes GPU 0 when the CUDA plugin sees one, else the CPU; cuda without
  // a usable GPU is an error at load.
  std::string device = "auto";
  // Steps traced into the run's trace.json (core/trace.h), from the 6th micro-batch on (the
  // first ones size the arena and autotune); 0 = no trace.
  int64_t profile = 0;
  // An events file of the run's scalars in the run directory for `tensorboard --logdir`
  // (train/tensorboard_observer.h).
  bool tensorboard = false;
  // The memory train.batch_size: auto may fill: bytes with a unit ("8GiB", "512MiB", "1e9"), or
  // auto (most of the available RAM, or the GPU's free memory on a CUDA run). Kept as written.
  std::string memory_limit = "auto";
  // auto | off: whether the training step is captured once per batch shape and replayed (a CUDA
  // graph, train/step_graphs.h) where the device can and the step allows it; off never does.
  std::string cuda_graphs = "auto";
  bool operator==(const RuntimeConfig&) const = default;
};

// train.batch_size: auto, held as this (no real batch is 0 windows).
inline constexpr int64_t kAutoBatch = 0;

struct Config {
  uint64_t seed = 0;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  RuntimeConfig runtime;
  bool operator==(const Config&) const = default;
};

// Forecasts per target and step: train.quantiles' count for the quantile loss, else 1.
inline int64_t quantile_levels(const TrainConfig& t) {
  return t.loss == "quantile" ? static_cast<int64_t>(t.quantiles.size()) : 1;
}
// The levels a run forecasts: train.quantiles under the quantile loss, else none.
inline std::vector<double> forecast_quantiles(const TrainConfig& t) {
  return t.loss == "quantile" ? t.quantiles : std::vector<double>{};
}

// Reads the YAML file at `path` (which may be empty: all defaults), then applies each
// override "dotted.key=value" in order; the value is a YAML scalar or flow sequence
// ("data.split=[0.7,0.2,0.1]"). Relative data.path / model.init_from written in the file are
// resolved against the file's directory, those given as overrides against the working
// directory; both are stored absolute. Throws Error naming file:line:col (or the override)
// and the key for every unknown key, bad type, out-of-range value or YAML syntax error.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Same as load_config for YAML text held in memory; `name` is used in messages and `base_dir`
// resolves relative paths found in the text.
Config load_config_text(const std::string& text, const std::string& name, const std::string& base_dir,
                        const std::vector<std::string>& overrides = {});

// The fully resolved config, every key, in canonical order and formatting: reloading it gives
// an equal Config. Written to the run directory as config.yaml.
std::string to_yaml(const Config& config);

// 16 lowercase hex digits: FNV-1a 64 over to_yaml(config). Stable across platforms and
// builds as long as the key set is unchanged; checkpoints store it to detect config drift.
std::string config_hash(const Config& config);

// Every valid dotted key, in canonical order (for help text and tests).
std::vector<std::string> config_keys();
// The keys whose value is a file path (data.path, data.npy.*, model.init_from, ...): the
// service keeps overrides of these inside its root.
std::vector<std::string> config_path_keys();

}  // namespace seqtrain
