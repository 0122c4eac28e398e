// Run directory housekeeping: see run_dir.h.
#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backend/autotune.h"
#include "core/error.h"
#include "io/atomic_dir.h"
#include "train/checkpoint.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

RunLock::RunLock(const fs::path& run) {
  const std::string path = (run / ".lock").string();
  fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ST_CHECK(fd_ >= 0, "cannot create '{}': {}; check that the run directory is writable", path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fail("another seqtrain process is training in '{}' (it holds the lock {}); wait for it to finish, stop it, "
         "or choose another --out",
         run.string(), path);
  }
}

RunLock::~RunLock() { ::close(fd_); }

std::vector<std::string> prepare_run_dir(const fs::path& run, bool clear) {
  if (clear)
    for (const auto& e : fs::directory_iterator(run))
      if (e.path().filename() != ".lock") fs::remove_all(e.path());
  fs::create_directories(run / "checkpoints");
  return recover_checkpoints((run / "checkpoints").string());
}

void write_config_yaml(const fs::path& run, const std::string& yaml) {
  if (slurp(run / "config.yaml") != yaml) write_file_atomic((run / "config.yaml").string(), yaml);
}

int64_t load_autotune_cache(const fs::path& run, Autotuner& tuner) {
  const fs::path path = run / "autotune.json";
  if (!fs::exists(path)) return 0;
  return static_cast<int64_t>(tuner.import_json(slurp(path)));
}

void save_autotune_cache(const fs::path& run, const Autotuner& tuner) {
  write_file_atomic((run / "autotune.json").string(), tuner.export_json());
}

}  // namespace seqtrain
