// The service's child processes: `seqtrain train` started so that it dies with the server,
// reaped without blocking, and recognised after a server restart. Training never runs inside
// the server process: a crash or a stuck kernel in a run cannot take the service down.
#pragma once
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace seqtrain::serve {

// Starts argv (argv[0] an absolute path) in `cwd` with stdin from /dev/null and stdout and
// stderr appended to `log`. The child gets SIGTERM when the server dies (PR_SET_PDEATHSIG), so
// `seqtrain train` finishes its step and writes `last`. That signal follows the *thread* that
// forked: call this only from a thread that lives as long as the server. Throws Error.
pid_t spawn_child(const std::vector<std::string>& argv, const std::filesystem::path& log,
                  const std::filesystem::path& cwd);

struct ExitStatus {
  int code = 0;    // exit code, or 128 + signal when killed by one
  int signal = 0;  // the signal that ended it, 0 when it exited
};
// The child's status once it has ended (and is reaped); nullopt while it runs.
std::optional<ExitStatus> try_reap(pid_t pid);

// True when `pid` is alive and is a seqtrain process: a child a previous server left behind.
bool seqtrain_alive(pid_t pid);

}  // namespace seqtrain::serve
