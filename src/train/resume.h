// Resume: which checkpoint a `seqtrain train --resume` continues from, and which config
// changes it accepts. A resumed run must replay the uninterrupted run exactly, so everything
// that shapes the computation has to match the checkpoint's config; only how long to train,
// where (threads, device) and what watches it may change.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "models/model.h"

namespace seqtrain {

// A checkpoint that could continue the run, with its state.json already read.
struct ResumeCandidate {
  std::string dir;
  nlohmann::json state;
};

// `last` and every step-<N> under ckpt_dir whose state.json reads, newest training position
// first. Normally `last` is the newest; a step checkpoint can be newer when a crash fell between
// publishing it and linking `last`. Position = micro-batches done, then epoch (an epoch-end
// checkpoint, written after validation, says epoch+1 at the same micro-batch count); ties go to
// `last`. Unreadable candidates are skipped with a warning on stderr.
std::vector<ResumeCandidate> resume_candidates(const std::filesystem::path& ckpt_dir);

// The config keys a resumed run may change: how long to train, how many threads, which device,
// and whether TensorBoard watches.
const std::vector<std::string>& resume_changeable_keys();

// One key whose value differs between two configs, values as to_yaml() writes them
// ("(absent)" when only one side has the key).
struct ConfigChange {
  std::string key, before, after;
};

// Compares two configs in to_yaml() form key by key (dotted keys, canonical order).
std::vector<ConfigChange> config_differences(const std::string& before_yaml, const std::string& after_yaml);

// Throws Error when a key outside resume_changeable_keys() differs from the config checkpoint
// `ckpt` (state `st`) was written with, naming the key, both values and run/config.yaml. A key
// the checkpoint's config lacks (added to seqtrain later) counts as unchanged at its default.
// Prints each accepted change unless quiet.
void check_resume_config(const nlohmann::json& st, const Config& config, const std::filesystem::path& run,
                         const std::string& ckpt, bool quiet);

// Throws Error when checkpoint `ckpt` (state `st`) holds a "model_spec" other than `spec`, the
// one this run's config resolves to on its data, naming each differing field with both values
// and run/config.yaml. The config check above cannot see what the data decides (input_size,
// output_size, vocab_size: a data file that changed shape), and without this the weights would
// only fail to load, leaving "no checkpoint can be loaded". Checkpoints without "model_spec"
// (older seqtrain) pass: their config was compared above and load_checkpoint checks every
// weight's name and shape.
void check_resume_spec(const nlohmann::json& st, const ModelSpec& spec, const std::filesystem::path& run,
                       const std::string& ckpt);

}  // namespace seqtrain
