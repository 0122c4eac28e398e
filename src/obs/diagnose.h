// Diagnosis: `seqtrain diagnose CONFIG [--set k=v ...]`, what a job will meet before it is
// started: the machine, the data (per split, memory), the model (parameters, activation memory
// with and without train.grad_checkpoint), a step time measured over a few real training steps
// (TrainLoop::time_steps: the loop's own loader, model and step, no run directory), the epoch and
// run time that follow, and findings: errors (the job would fail or not fit) and warnings (it
// would run badly), each with its fix.
// Why measure rather than model: a step's time depends on the kernels autotune picks, the ISA,
// the threads and the loader, which no formula of the config predicts within 25%; a few steps do.
// Why a separate command and not a flag of train: it must never write a run directory, and it
// must go on past an error to say everything else it can (train stops at the first).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "train/train_loop.h"

namespace seqtrain {

struct Finding {
  bool error = false;  // the job would fail or not fit; otherwise a warning
  std::string text;    // what is wrong, naming the key
  std::string fix;     // what to change
};

struct Diagnosis {
  struct Section {
    std::string title;
    std::vector<std::pair<std::string, std::string>> lines;  // "key: value"
  };
  std::deque<Section> sections;  // a deque: a section being filled stays put while others are added
  std::vector<Finding> findings;
  bool has_error() const;
};

struct DiagnoseOptions {
  int64_t warmup = 2;        // untimed first batches (arena sizing, autotune)
  int64_t steps = 10;        // timed batches
  int64_t eval_batches = 4;  // timed validation batches
  // Activation memory is measured at min(train.batch_size, this) first and scaled to the batch,
  // so that a batch too large for memory is found without allocating it.
  int64_t probe_batch = 16;
};

// Everything diagnose says about `config_path` with `overrides`; it never throws for a problem of
// the job (that becomes a Finding), and writes nothing.
Diagnosis diagnose(const std::string& config_path, const std::vector<std::string>& overrides,
                   const DiagnoseOptions& options = {});

// The diagnosis as the command prints it: sections of "  key: value" lines, then the findings.
std::string format_diagnosis(const Diagnosis& d);

// The pieces, for tests.

// The time a job takes from its measured step: an epoch's training batches (what
// metrics.jsonl's "data" records call epoch_train_s), its validation passes, the test pass.
struct RunEstimate {
  double epoch_train_s = 0;
  double validation_s = 0;   // one validation pass
  double validations = 0;    // passes over the run (train.eval_every)
  double test_s = 0;
  double run_s = 0;          // at most: early stopping may end the run sooner
};
RunEstimate estimate_run(const StepTiming& t, const Config& config);

// data.workers (an integer, or auto) against the cores the compute threads leave free.
std::optional<Finding> check_workers(const std::string& workers, int64_t cores, int threads);

// A job needing `need` bytes of RAM (activations of a batch, parameters with gradients and
// optimizer state, data, loader buffers) where `available` are free: an error above it, a
// warning above 80% of it. `activation_bytes` and `checkpointed_bytes` (0: unknown) say which
// fixes help.
std::optional<Finding> check_memory(double need, double available, double activation_bytes,
                                    double checkpointed_bytes, const Config& config);

}  // namespace seqtrain
