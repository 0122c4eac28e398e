// The batch-size finder: `train.batch_size: auto` becomes the batch a run trains with.
// First the largest power-of-two batch whose memory fits runtime.memory_limit with a 10% margin,
// then, at or below it, the batch with the best samples/s, both from a few real training steps
// of a probe: a fresh model, optimizer and step built as the run builds them (train/run_parts.h)
// and thrown away after, so the run's own model starts untouched.
//
// The memory of training at batch B, what a candidate must fit:
//   parameters + gradients + optimizer moments              (fixed, from the parameter count)
//   + the step's arena and an evaluation's beside it          (measured by a step at B, or
//     + what layers hold outside them                          predicted: the largest measured
//                                                              plus the growth per sample of
//                                                              the last two)
//   + the loader's batch buffers (its slots and the resume's   (host budgets only: on a GPU they
//     replay buffer), B samples each                           are host memory, not the GPU's)
// A candidate is first predicted from the batches measured below it and only run when the
// prediction fits, so the search never steps a batch it expects to overflow the budget; a
// measured one that does not fit is refused too. Throughput is timed on the candidates that fit
// (a warm-up step first: it sizes the arena and tunes the kernels), and timing stops once two
// larger batches in a row gained less than 5%: past that a larger batch only costs updates.
// Among the timed batches within 5% (timing noise) of the best samples/s the smallest is taken,
// for the same throughput with more updates an epoch.
//
// Why measure rather than compute: activations depend on the family, the precision, the kernels
// chosen and gradient checkpointing; the arena is the one place that knows, after one step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "data/batch_source.h"
#include "models/model.h"
#include "train/data_plan.h"

namespace seqtrain {

// A budget is met when the total times this is at most the budget: room for what the model
// leaves out (allocator rounding, the host's copies of a checkpoint, small buffers).
inline constexpr double kBatchMemoryMargin = 1.10;

// The bytes training at one batch size holds (see the top).
struct BatchMemory {
  size_t weights = 0;      // parameters + gradients
  size_t optimizer = 0;    // the optimizer's moments
  size_t activations = 0;  // the step's arena + an evaluation's + layers' scratch
  size_t loader = 0;       // the loader's batch buffers
  size_t total() const { return weights + optimizer + activations + loader; }
  // The total with kBatchMemoryMargin: what the budget must hold.
  size_t needed() const;
};

struct BatchCandidate {
  int64_t batch = 0;
  BatchMemory memory;
  bool measured = false;  // activations from a step at this batch; else extrapolated
  bool fits = false;
  std::optional<double> samples_per_s;  // timed candidates only
  std::string failed;     // a step at this batch failed (a GPU out of memory): the error
};

struct BatchChoice {
  int64_t batch = 0;
  int64_t budget = 0;
  std::string budget_why;  // where the budget came from, for the log
  std::vector<BatchCandidate> candidates;  // in increasing batch order, as tried
  std::string rule;        // why `batch` was taken
  // The log's lines: the budget, each candidate (memory, measured or estimated, samples/s or why
  // refused), the choice and why.
  std::vector<std::string> lines() const;
};

// What one candidate's real steps showed (BatchSearch::measure).
struct BatchMeasurement {
  size_t activations = 0;       // BatchMemory::activations at this batch: the memory held
  size_t used = 0;              // of it, what the passes used (without the arena's chunk slack)
  size_t buffer_bytes = 0;      // one loader buffer holding this batch
  double samples_per_s = 0;
};

// The search over 1, 2, 4, ... max_batch, given how to measure a batch; separate from the probe
// so the rule can be tested without training.
struct BatchSearch {
  int64_t budget = 0;
  std::string budget_why;
  int64_t max_batch = 1;        // the largest power of two the training split fills
  size_t weights = 0, optimizer = 0;
  int64_t loader_buffers = 0;   // buffers of a batch the loader (and the replay) keep; 0 on a GPU budget
  std::function<BatchMeasurement(int64_t batch)> measure;
};
// Error naming runtime.memory_limit and the smallest budget that fits when one sample does not.
BatchChoice search_batch_size(const BatchSearch& search);

// The budget runtime.memory_limit gives on `backend`: its bytes; auto: the GPU's free memory on
// a device backend, else 80% of MemAvailable. *why says which, for the log.
int64_t memory_budget(const std::string& memory_limit, Backend& backend, std::string* why);

// What the probe is built from: the run's config, data and model spec.
struct BatchProbe {
  const Config& config;
  const DataPlan& plan;
  const BatchSource& train;     // the training batches as the run reads them (augmented, cached)
  ModelSpec spec;
  ModelEnv env;                 // precision and a tuner of the probe's own
  int64_t loader_slots = 1;     // data/loader.h's loader_slots for the run's workers
};
// Searches with real steps of a probe (see the top).
BatchChoice find_batch_size(const BatchProbe& probe, int64_t budget, const std::string& budget_why);

// train.batch_size: auto for a run about to start, as the training loop and find-lr both need it:
// the budget from runtime.memory_limit on the spec's backend, a probe with its own tuner (its
// decisions are for the probe's batch shapes, not the run's cache), the search.
BatchChoice choose_auto_batch(const Config& config, const DataPlan& plan, const BatchSource& train,
                              const ModelSpec& spec, const Precision& precision, int64_t workers);


}  // namespace seqtrain
