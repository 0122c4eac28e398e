// DataPlan: where the trainer's batches come from. plan_data() turns the `data:` section into
// one BatchSource per split (csv/synthetic windows, npy arrays, text blocks) plus what the model needs
// to match them, so the training loop and evaluate() work the same for every source.
// training_feed() then stacks augmentation and the pre-augmentation cache on the train split.
// docs/DATA.md describes the npy layout, docs/PIPELINE.md the cache.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "data/augment.h"
#include "data/cache.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/masking.h"

namespace seqtrain {

struct DataPlan {
  std::shared_ptr<const BatchSource> train, val, test;  // val / test null when the job has none
  int64_t steps = 0, features = 0;  // x of a sample is [steps, features]
  int64_t outputs = 0;              // model outputs per sample
  int64_t classes = 0;              // > 0: y holds class labels (cross-entropy), one per y value
  int64_t vocab = 0;                // text: token ids (the char LM predicts one per step)
  std::vector<int64_t> y_shape;     // npy regression: a sample's y shape ([H] or [H, targets])
  std::vector<int64_t> target_inputs;  // npy regression: data.npy.target_features, checked
  nlohmann::json vocab_json;        // text: the vocabulary, saved in state.json
  // train.task masked_pretrain: the masks every batch draws (x is its own target, y unused).
  std::optional<SampleMasking> masking;
  std::shared_ptr<const Dataset> windows;  // csv/synthetic only: columns, normalizer, baseline
  nlohmann::json normalizer;        // the statistics state.json keeps (compared on resume)
  std::vector<std::string> files;   // source files in order (hashed into the cache key)
  std::string source;               // one line for the log and cache listings
  const char* unit = "windows";     // what a sample is called in the log

  static int64_t size_of(const std::shared_ptr<const BatchSource>& s) { return s ? s->size() : 0; }
};

// Reads (maps) the data of `config`. Throws Error naming the config key and file for a
// missing glob, X/y sample count or shape mismatches, bad dtypes and labels.
DataPlan plan_data(const Config& config);

// The data.augment section as the augmentation kernels take it.
AugmentOptions augment_options(const Config& config);

// The loader's worker count: data.workers, or workers_auto over the cores the compute
// threads leave free; *reason says which for the log.
int64_t loader_workers(const Config& config, int compute_threads, std::string* reason);

// The data settings hashed into the cache key: the resolved `data:` section except the keys
// that cannot change a cached sample (workers, prefetch, the cache directory), and the seed
// (which seeds augmentation).
std::string cache_settings(const Config& config);

// The training batches as the loop reads them: the plan's train split, augmented when
// data.augment is on, read from DIR/<key>.stcache when data.cache is set (built on a miss,
// with `workers` threads). `source` points into this object or the plan, which must outlive it.
struct TrainFeed {
  const BatchSource* source = nullptr;
  std::unique_ptr<AugmentedSource> augmented;
  std::shared_ptr<CachedSource> cached;
  bool augment = false;
  CacheInfo cache;  // path empty when data.cache is off
};
TrainFeed training_feed(const DataPlan& plan, const Config& config, int64_t workers);

// What a model trained on `plan` takes and gives, for state.json ("io"): x [steps, features] per
// sample, `outputs` values per sample (`classes` logits when > 0), y_shape for npy regression.
// `seqtrain predict` rebuilds the model of an npy run from it without the training files.
nlohmann::json model_io_json(const DataPlan& plan);

// What a sample of `plan` is, for the loader's typed batches: x [steps, features] values or
// [steps] token ids (text); y [outputs] values, one int64 label (classification), or [T] int64
// next tokens; for masked pretraining, its masks: `draw` per_epoch for the training batches,
// per_sample for validation and test (fixed masks).
SampleLayout sample_layout(const DataPlan& plan, MaskDraw draw);

}  // namespace seqtrain
