// Checkpoint: the on-disk contract (docs/CHECKPOINTS.md). A directory checkpoints/<tag>/ holding
//   model.safetensors      weights, PyTorch state_dict names
//   optimizer.safetensors  optimizer moments, "<buffer>.<param name>" per tensor; with
//                          train.ema_decay also "raw.<param name>", the weights the optimizer
//                          steps (model.safetensors then holds their average, optim/ema.h)
//   state.json             step, epoch, RNG/data cursor, best metric, config hash,
//                          normalization statistics, schedule state, file checksums
// written into a temporary directory, fsynced, then renamed into place. load_checkpoint()
// verifies the checksums and the model's parameter names and shapes before touching anything.
//
// The tags a run writes (docs/CHECKPOINTS.md): `best`, `last`, and `step-<N>` (N = optimizer
// steps taken) every train.checkpoint_every steps or at each epoch's end. The helpers below
// manage checkpoints/ as a whole: listing and pruning step checkpoints, publishing `last` as
// hard links of a step checkpoint, and tidying what a crash left behind. CheckpointWriter
// writes them on a background thread so training only pays for a memory copy.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nn/params.h"
#include "optim/optimizer.h"

namespace seqtrain {

struct CheckpointData {
  const ParamStore* params = nullptr;  // source of weights (and of the optimizer's layout)
  OptimizerState optimizer;
  nlohmann::json state;                // everything else; "checksums" is filled in on save
  // train.ema_decay: the trained weights, when `params` holds their average; empty otherwise.
  std::vector<float> raw;
};

// Writes dir (e.g. run/checkpoints/best) atomically.
void save_checkpoint(const std::string& dir, const CheckpointData& data);

// Verifies checksums, loads weights into `params` (names and shapes must match) and returns
// state.json; when `optimizer` is given, fills it with the saved moments, and `raw` (if given)
// with the trained weights of a checkpoint written with train.ema_decay (left empty without).
nlohmann::json load_checkpoint(const std::string& dir, ParamStore& params, OptimizerState* optimizer = nullptr,
                               std::vector<float>* raw = nullptr);

// The path of dir/model.safetensors after verifying its checksum against state.json (for
// reading the weights without loading them into a store of the same names: init_from.h).
std::string verified_model_file(const std::string& dir);

// Reads and parses dir/state.json and checks it against its own checksum ("state_checksum",
// which save_checkpoint writes: damage or an edit that leaves valid JSON would otherwise reach
// the readers of its fields as wrong numbers or a type error). Nothing else is verified.
// A state without the key (written before it existed) is read unchecked.
nlohmann::json read_checkpoint_state(const std::string& dir);

// Sets state["state_checksum"] to the hash of the rest of `state` (what read_checkpoint_state
// checks); save_checkpoint calls it last.
void seal_checkpoint_state(nlohmann::json& state);

// "step-<updates>", the tag of a periodic checkpoint.
std::string step_tag(int64_t updates);

// The step-<N> checkpoints in ckpt_dir, oldest first, as (N, path). Names that do not parse
// and hidden entries (.tmp-*, .old-*) are not listed.
std::vector<std::pair<int64_t, std::string>> list_step_checkpoints(const std::string& ckpt_dir);

// Atomically publishes `dst` as a copy of the whole checkpoint `src`. Files are hard-linked
// (checkpoint files are never modified in place, so sharing them is safe and costs no I/O);
// where the filesystem refuses links they are copied and fsynced.
void link_checkpoint(const std::string& src, const std::string& dst);

// Deletes all but the newest `keep` step checkpoints (keep 0 keeps all), never the one named
// `protect` (a tag such as "step-40"; empty protects nothing). Each victim is first renamed
// to a .tmp-* name, so a crash while deleting never leaves a half checkpoint under a real tag.
void prune_step_checkpoints(const std::string& ckpt_dir, int64_t keep, const std::string& protect);

// Tidies what a crash can leave in ckpt_dir: .tmp-* directories (unfinished writes or
// deletes) are removed; an .old-<tag> (the previous <tag>, moved aside while a new one was
// renamed into place) is restored as <tag> when <tag> is missing and removed otherwise.
// Returns one human-readable line per action. Call it only while no writer is running.
std::vector<std::string> recover_checkpoints(const std::string& ckpt_dir);

// What the background writer does with one snapshot: write `dir`; then, for periodic
// checkpoints, publish `link_last` as hard links of it and prune older step checkpoints.
// Pruning comes last, so a step checkpoint is only deleted once a newer one is safely on disk.
struct WriteJob {
  std::string dir;
  std::string link_last;  // empty: no `last` update
  std::string prune_in;   // checkpoints/ to prune; empty: no pruning
  int64_t keep = 0;       // prune_step_checkpoints' keep
  std::string protect;    // tag never pruned (the checkpoint this run resumed from)
};

// Writes checkpoints from snapshots on one background thread, one at a time, so the training
// loop only pays for a memory copy (and waits only when checkpoints come faster than the
// disk takes them). A failed write is reported by the next submit() or wait() as an Error.
class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  ~CheckpointWriter();  // joins; never throws (errors are wait()'s to report)
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous job, snapshots `params` (and takes `optimizer` and `raw`, the trained
  // weights when `params` holds their average), then starts `job`.
  void submit(WriteJob job, const ParamStore& params, OptimizerState optimizer, nlohmann::json state,
              std::vector<float> raw = {});
  // Waits for the job in flight; throws Error if it failed.
  void wait();

 private:
  std::unique_ptr<ParamStore> snapshot_;
  OptimizerState opt_;
  std::vector<float> raw_;
  std::thread thread_;
  std::string error_;
};

}  // namespace seqtrain
