// The run directory's housekeeping, apart from the loop: the exclusive lock a writer holds,
// clearing it for --overwrite and tidying what a crash left (before any writer starts),
// config.yaml, and the autotune cache. Only the primary rank calls any of it: other ranks
// never write the run directory.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace seqtrain {

class Autotuner;

// An exclusive flock on <run>/.lock for the whole job. Two processes training into one run
// directory would overwrite each other's checkpoints, and crash recovery (which deletes
// unfinished .tmp-* writes) is only safe when no other writer exists. The kernel drops the
// lock when the process dies, kill -9 included, so a stale lock file never blocks anyone.
class RunLock {
 public:
  explicit RunLock(const std::filesystem::path& run);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// Creates run/ and run/checkpoints/, empties run/ (but the lock) when `clear`, and tidies
// checkpoints/ after a crash. Returns one note per action taken. Call with the lock held.
std::vector<std::string> prepare_run_dir(const std::filesystem::path& run, bool clear);

// Writes run/config.yaml when its text differs from `yaml` (a resume may extend epochs).
void write_config_yaml(const std::filesystem::path& run, const std::string& yaml);

// Loads run/autotune.json into `tuner` when it exists; returns the number of decisions taken.
int64_t load_autotune_cache(const std::filesystem::path& run, Autotuner& tuner);
// Saves the tuner's decisions to run/autotune.json atomically.
void save_autotune_cache(const std::filesystem::path& run, const Autotuner& tuner);

}  // namespace seqtrain
