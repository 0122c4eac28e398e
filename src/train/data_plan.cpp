// plan_data for each source kind, and the augmentation/cache stack of the train split.
// npy arrays are only mapped here; labels are scanned once (a [N] vector per file) to check
// them and to count the classes.
#include "train/data_plan.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "config/scalar.h"
#include "core/rng.h"
#include "data/concat.h"
#include "data/fleet.h"
#include "data/npy.h"
#include "data/random_text.h"
#include "data/sources.h"
#include "data/split.h"
#include "data/text.h"
#include "data/zscore_source.h"
#include "io/atomic_dir.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

// What every npy split must agree on with the first training file.
struct NpyShape {
  bool known = false;
  int64_t steps = 0, features = 0;
  std::vector<int64_t> y_tail;  // y's shape without N
  std::string x_file, y_file;
};

// Reruns f, prefixing a failure with the config key(s) it came through.
template <typename F>
auto with_key(const std::string& keys, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    fail("{}: {}", keys, e.what());
  }
}

std::string shape_of(const std::vector<int64_t>& tail) {
  std::string s = "[N";
  for (int64_t d : tail) s += ", " + std::to_string(d);
  return s + "]";
}

// The samples of one npy split: X, y (and lengths) files matched in sorted order, checked against
// `ref` (set from the first file seen), labels checked and their maximum kept in *max_label.
// The split's file keys are data.npy.<split>_x, _y and _len; n gives classes and pad_value. An
// empty y_glob opens X alone (masked pretraining: x is its own target).
std::shared_ptr<const BatchSource> open_npy_split(const std::string& split, const std::string& x_glob,
                                                  const std::string& y_glob, const std::string& l_glob,
                                                  const NpyConfig& n, NpyShape& ref, std::vector<std::string>& files,
                                                  int64_t* max_label) {
  const std::string xk = "data.npy." + split + "_x", yk = "data.npy." + split + "_y", lk = "data.npy." + split + "_len";
  const int64_t classes = n.classes;
  const bool with_y = !y_glob.empty();
  const auto xs = glob_files(x_glob, xk), ys = with_y ? glob_files(y_glob, yk) : std::vector<std::string>{};
  const auto ls = l_glob.empty() ? std::vector<std::string>{} : glob_files(l_glob, lk);
  ST_CHECK(!with_y || xs.size() == ys.size(),
           "{} matches {} file(s) ('{}') but {} matches {} ('{}'); each X file needs one y file, paired in sorted "
           "order", xk, xs.size(), x_glob, yk, ys.size(), y_glob);
  ST_CHECK(ls.empty() || ls.size() == xs.size(),
           "{} matches {} file(s) ('{}') but {} matches {} ('{}'); each X file needs one lengths file, paired in "
           "sorted order", lk, ls.size(), l_glob, xk, xs.size(), x_glob);
  std::vector<std::shared_ptr<const BatchSource>> parts;
  std::vector<std::string> names;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto src = with_key(with_y ? xk + " / " + yk : xk,
                        [&] { return std::make_shared<NpySource>(NpySource::open(xs[i], with_y ? ys[i] : "")); });
    if (!ls.empty()) {
      with_key(lk, [&] { src->read_lengths(ls[i]); });
      files.push_back(ls[i]);
    } else if (n.pad_value != "none") {
      with_key("data.npy.pad_value", [&] { src->lengths_from_padding(*parse_double(n.pad_value)); });
    }
    src->check_values();
    files.push_back(xs[i]);
    names.push_back(xs[i]);
    if (!with_y) {
      ST_CHECK(!ref.known || (src->steps() == ref.steps && src->features() == ref.features),
               "{}: {} has samples of {} steps x {} features but {} has {} x {}; every X file needs the same [T, F]",
               xk, xs[i], src->steps(), src->features(), ref.x_file, ref.steps, ref.features);
      if (!ref.known) ref = {true, src->steps(), src->features(), {}, xs[i], ""};
      parts.push_back(std::move(src));
      continue;
    }
    const NpyArray& y = *src->y();
    const std::vector<int64_t> tail(y.shape.begin() + 1, y.shape.end());
    if (!ref.known) {
      ref = {true, src->steps(), src->features(), tail, xs[i], ys[i]};
    } else {
      ST_CHECK(src->steps() == ref.steps && src->features() == ref.features,
               "{}: {} has samples of {} steps x {} features but {} has {} x {}; every X file needs the same [T, F]",
               xk, xs[i], src->steps(), src->features(), ref.x_file, ref.steps, ref.features);
      ST_CHECK(tail == ref.y_tail, "{}: {} has y of shape {} per file but {} has {}; every y file needs the same shape",
               yk, ys[i], shape_of(tail), ref.y_file, shape_of(ref.y_tail));
    }
    if (tail.empty()) {  // class labels: integers in [0, classes)
      std::vector<float> v(static_cast<size_t>(y.count));
      y.read_floats(0, y.count, v.data());
      for (int64_t k = 0; k < y.count; ++k) {
        const float l = v[k];
        ST_CHECK(l >= 0 && std::floor(l) == l && l < 16777216.f,
                 "{}: {}: y[{}] = {} is not a class label; a y of shape [N] holds integer labels 0, 1, ... (for a "
                 "regression target save it as [N, 1])", yk, ys[i], k, l);
        ST_CHECK(classes == 0 || l < classes, "{}: {}: label {} at y[{}] is outside data.npy.classes = {}; raise "
                 "data.npy.classes or leave it 0 to count the classes from the labels", yk, ys[i], l, k, classes);
        *max_label = std::max(*max_label, static_cast<int64_t>(l));
      }
    }
    files.push_back(ys[i]);
    parts.push_back(std::move(src));
  }
  if (parts.size() == 1) return parts[0];
  return with_key(xk, [&] { return std::make_shared<ConcatSource>(parts, names); });
}

// The masks' own seed: the job's seed, kept apart from the epoch order's and augmentation's.
uint64_t mask_seed(uint64_t seed) { return mix_seed(seed, 0x3a5c); }

// Masked pretraining reads X alone; y files given anyway are said to be unused, not read.
void warn_unused_y(const NpyConfig& n) {
  std::string given;
  for (const auto& [key, glob] : {std::pair<const char*, const std::string*>{"data.npy.train_y", &n.train_y},
                                  {"data.npy.val_y", &n.val_y}, {"data.npy.test_y", &n.test_y}})
    if (!glob->empty()) given += (given.empty() ? "" : ", ") + std::string(key);
  if (!given.empty())
    std::fprintf(stderr, "seqtrain: warning: %s set but unused: train.task masked_pretrain reconstructs X itself; "
                 "drop %s to silence this\n", given.c_str(), given.find(',') == std::string::npos ? "it" : "them");
}

// train.task masked_pretrain: x [T, F] is its own target, hidden where the masks say.
void plan_masking(const Config& config, const NpyShape& ref, DataPlan& p) {
  const MaskingConfig& m = config.train.masking;
  if (m.strategy == "patch" && m.patch_size > ref.steps)
    fail("config key 'train.masking.patch_size' is {} but the samples of data.npy.train_x ({}) have T = {} steps; set "
         "train.masking.patch_size to at most {} (or use train.masking.strategy random or span)", m.patch_size,
         ref.x_file, ref.steps, ref.steps);
  p.outputs = p.steps * p.features;
  p.masking = SampleMasking{mask_options(m), mask_seed(config.seed), MaskDraw::per_epoch};
}

DataPlan plan_npy(const Config& config) {
  const NpyConfig& n = config.data.npy;
  const bool masked = config.train.task == "masked_pretrain";
  if (masked) warn_unused_y(n);
  const auto y_of = [&](const std::string& glob) { return masked ? std::string() : glob; };
  DataPlan p;
  NpyShape ref;
  int64_t max_label = -1;
  auto train = open_npy_split("train", n.train_x, y_of(n.train_y), n.train_len, n, ref, p.files, &max_label);
  std::shared_ptr<const BatchSource> val, test;
  if (!n.val_x.empty())
    val = open_npy_split("val", n.val_x, y_of(n.val_y), n.val_len, n, ref, p.files, &max_label);
  if (!n.test_x.empty())
    test = open_npy_split("test", n.test_x, y_of(n.test_y), n.test_len, n, ref, p.files, &max_label);
  p.steps = ref.steps;
  p.features = ref.features;
  const bool labels = !masked && ref.y_tail.empty();
  if (!labels && config.train.task == "classify")
    fail("config key 'train.task' is classify, but data.npy.train_y ({}) holds float targets of shape {}, not class "
         "labels; save integer labels of shape [N], or set train.task: regress (or forecast)", ref.y_file,
         shape_of(ref.y_tail));
  if (labels && (config.train.task == "regress" || config.train.task == "forecast"))
    fail("config key 'train.task' is {}, but data.npy.train_y ({}) holds class labels (shape [N]); save y as [N, "
         "targets] floats, or set train.task: classify", config.train.task, ref.y_file);
  if (masked) {
    plan_masking(config, ref, p);
  } else if (labels) {
    ST_CHECK(config.train.loss == "cross_entropy",
             "data.npy.train_y: {} holds class labels (shape [N]), which need train.loss: cross_entropy (got {}); for "
             "a regression target save y as [N, 1] or [N, H, targets]", ref.y_file, config.train.loss);
    p.classes = n.classes > 0 ? n.classes : max_label + 1;
    ST_CHECK(p.classes >= 2, "data.npy.train_y: the labels name only {} class(es); classification needs at least 2 "
             "(set data.npy.classes)", p.classes);
    p.outputs = p.classes;
  } else {
    ST_CHECK(config.train.loss != "cross_entropy",
             "train.loss is cross_entropy but data.npy.train_y ({}) has shape {}, not [N] class labels; use a "
             "regression loss (mse, mae, huber) or save integer labels of shape [N]", ref.y_file,
             shape_of(ref.y_tail));
    p.outputs = train->y_size() * quantile_levels(config.train);  // one forecast per level and target
    p.y_shape = ref.y_tail;
    const int64_t targets = p.y_shape.size() > 1 ? p.y_shape[1] : 1;
    const auto& tf = n.target_features;
    ST_CHECK(tf.empty() || static_cast<int64_t>(tf.size()) == targets,
             "config key 'data.npy.target_features' lists {} feature(s), but y ({}) has {} target(s) a sample; give one "
             "X feature index per target", tf.size(), ref.y_file, targets);
    for (int64_t f : tf)
      ST_CHECK(f < p.features, "config key 'data.npy.target_features' names feature {}, but X ({}) has {} features "
               "(0 to {}); fix the index", f, ref.x_file, p.features, p.features - 1);
    p.target_inputs = tf;
  }
  Normalizer stats;
  if (config.data.normalize == "zscore") {
    stats = fit_feature_zscore(*train, p.steps, p.features);
    auto wrap = [&](std::shared_ptr<const BatchSource>& s) {
      if (s) s = std::make_shared<ZscoreSource>(s, stats, p.features);
    };
    wrap(train);
    wrap(val);
    wrap(test);
  } else {
    for (int64_t f = 0; f < p.features; ++f) {
      stats.columns.push_back("x" + std::to_string(f));
      stats.shift.push_back(0.0);
      stats.scale.push_back(1.0);
    }
  }
  p.train = std::move(train);
  p.val = std::move(val);
  p.test = std::move(test);
  p.normalizer = stats.to_json();
  p.unit = "samples";
  p.source = masked ? fmt::format("npy: {} file(s), X [N, {}, {}] (masked pretraining: {} masks, ratio {})",
                                  p.files.size(), p.steps, p.features, config.train.masking.strategy,
                                  config.train.masking.mask_ratio)
                    : fmt::format("npy: {} file(s), X [N, {}, {}], y {}{}", p.files.size(), p.steps, p.features,
                                  shape_of(ref.y_tail), labels ? fmt::format(" ({} classes)", p.classes) : "");
  return p;
}

DataPlan plan_windows(const Config& config) {
  auto data = std::make_shared<const Dataset>(load_dataset(config));
  ST_CHECK(!data->train.empty(), "data.split leaves no training window; raise the train fraction");
  DataPlan p;
  p.windows = data;
  p.train = std::make_shared<WindowSource>(data->train);
  if (!data->val.empty()) p.val = std::make_shared<WindowSource>(data->val);
  if (!data->test.empty()) p.test = std::make_shared<WindowSource>(data->test);
  p.steps = data->train.steps();  // the lookback, then the known future's rows (data.future_features)
  p.features = data->n_features();
  p.outputs = data->train.y_size() * quantile_levels(config.train);
  p.normalizer = data->normalizer.to_json();
  if (!data_source(config.data).path_holds.empty())
    p.files = is_glob(config.data.path) ? glob_files(config.data.path, "data.path")
                                        : std::vector<std::string>{config.data.path};
  p.source = config.data.source + ": " + (config.data.path.empty() ? fmt::format("{} rows", data->table->rows)
                                                                   : config.data.path);
  if (data->fleet)
    p.source += fmt::format(" ({} series, normalize_scope {}{}{})", data->series.size(), config.data.normalize_scope,
                            data->skipped_note.empty() ? "" : "; ", data->skipped_note);
  return p;
}

// data.sampling random draws its offsets from this seed: the job's seed, kept apart from the
// epoch order's and augmentation's streams.
uint64_t random_text_seed(uint64_t seed) { return mix_seed(seed, 0x7e47); }

// Text: one token stream split chronologically like csv rows; samples are block_size tokens
// with the next tokens as targets.
DataPlan plan_text(const Config& config) {
  const DataConfig& d = config.data;
  const TextData text = with_key("data.path", [&] { return load_text(d.path, parse_vocab_kind(d.vocab)); });
  const int64_t n = static_cast<int64_t>(text.tokens->size());
  const auto ranges = split_rows(n, d.split);
  DataPlan p;
  std::shared_ptr<const BatchSource>* splits[3] = {&p.train, &p.val, &p.test};
  const char* names[3] = {"train", "val", "test"};
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && (d.split[i] <= 0 || ranges[i].size() == 0)) continue;
    const std::string where = fmt::format("{} ({} split: tokens [{}, {}) of {}; data.split {})", d.path, names[i],
                                          ranges[i].begin, ranges[i].end, n, d.split[i]);
    if (i == 0 && d.sampling == "random")
      *splits[i] = std::make_shared<RandomTextSource>(text.tokens, d.block_size, d.samples_per_epoch,
                                                      random_text_seed(config.seed), ranges[i].begin, ranges[i].end,
                                                      where);
    else
      *splits[i] = std::make_shared<TextSource>(text.tokens, d.block_size, d.stride, ranges[i].begin, ranges[i].end,
                                                where);
  }
  p.steps = d.block_size;
  p.features = 1;
  p.vocab = text.vocab.size();
  p.classes = p.vocab;
  p.outputs = p.vocab;
  p.vocab_json = text.vocab.to_json();
  p.normalizer = Normalizer{}.to_json();
  p.files.push_back(d.path);
  p.unit = "samples";
  p.source = fmt::format("text: {} ({} vocabulary of {} ids, {} tokens, block_size {}{})", d.path, d.vocab, p.vocab, n,
                         d.block_size, d.sampling == "random" ? fmt::format(", random offsets: {} samples an epoch",
                                                                             p.train->size()) : "");
  return p;
}

}  // namespace

nlohmann::json model_io_json(const DataPlan& plan) {
  return {{"steps", plan.steps}, {"features", plan.features}, {"outputs", plan.outputs},
          {"classes", plan.classes}, {"y_shape", plan.y_shape}};
}

DataPlan plan_data(const Config& config) {
  switch (data_source(config.data).kind) {
    case SourceKind::arrays: return plan_npy(config);
    case SourceKind::text: return plan_text(config);
    case SourceKind::series: break;
  }
  return plan_windows(config);
}

AugmentOptions augment_options(const Config& c) {
  const AugmentConfig& a = c.data.augment;
  AugmentOptions o;
  o.seed = mix_seed(c.seed, 0xa7e);
  o.jitter_sigma = static_cast<float>(a.jitter_sigma);
  o.scale_sigma = static_cast<float>(a.scale_sigma);
  o.warp_sigma = static_cast<float>(a.warp_sigma);
  o.warp_knots = a.warp_knots;
  o.shift_max = a.shift_max;
  o.mask_prob = static_cast<float>(a.mask_prob);
  o.mask_width = a.mask_width;
  o.validate();
  return o;
}

int64_t loader_workers(const Config& config, int compute_threads, std::string* reason) {
  *reason = "data.workers = " + config.data.workers;
  return config.data.workers == "auto"
             // Compute threads own their cores: a loader thread sharing one stalls every OpenMP
             // barrier of the step (10x slower measured on 2 cores), so auto only uses cores
             // the compute threads leave free.
             ? workers_auto(system_cores() - compute_threads + 1, system_available_ram(), reason)
             : std::stoll(config.data.workers);
}

std::string cache_settings(const Config& config) {
  std::istringstream in(to_yaml(config));
  std::string line, out = "seed: " + std::to_string(config.seed) + "\n";
  bool in_data = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') in_data = line == "data:";
    if (!in_data) continue;
    if (line.rfind("  workers:", 0) == 0 || line.rfind("  prefetch:", 0) == 0 || line.rfind("  cache:", 0) == 0)
      continue;
    out += line + "\n";
  }
  return out;
}

TrainFeed training_feed(const DataPlan& plan, const Config& config, int64_t workers) {
  TrainFeed f;
  f.source = plan.train.get();
  const AugmentOptions aug = augment_options(config);
  f.augment = aug.enabled();
  if (f.augment) {
    f.augmented = std::make_unique<AugmentedSource>(*plan.train, aug, plan.steps, plan.features);
    f.source = f.augmented.get();
  }
  if (config.data.cache.empty()) return f;
  const std::string& dir = config.data.cache;
  const std::string settings = cache_settings(config);
  const uint64_t key = cache_key(plan.files, settings, f.source->size(), f.source->x_size(), f.source->y_size(),
                                 config.data.cache_epochs);
  // A regular file where the directory should be: say so before create_directories does less clearly.
  ST_CHECK(!fs::exists(dir) || fs::is_directory(dir),
           "data.cache: '{}' exists and is not a directory; point data.cache at a directory", dir);
  f.cached = CachedSource::open_or_build(*f.source, dir, key, config.data.cache_epochs, workers, &f.cache);
  f.source = f.cached.get();
  // What `seqtrain data info` shows beside the header: which data and settings made it.
  const std::string meta = f.cache.path + ".json";
  if (!f.cache.hit || !fs::exists(meta)) {
    nlohmann::json j;
    j["source"] = plan.source;
    j["files"] = plan.files;
    j["settings"] = settings;
    j["augment"] = f.augment;
    write_file_atomic(meta, j.dump(2) + "\n");
  }
  return f;
}

SampleLayout sample_layout(const DataPlan& plan, MaskDraw draw) {
  SampleLayout l = sample_layout(plan.steps, plan.features, plan.vocab > 0, plan.classes > 0, plan.train->y_size());
  if (plan.masking) {
    l.mask = plan.masking;
    l.mask->draw = draw;
  }
  return l;
}

}  // namespace seqtrain
