#include "serve/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace seqtrain::serve {

pid_t spawn_child(const std::vector<std::string>& argv, const std::filesystem::path& log,
                  const std::filesystem::path& cwd) {
  // Everything the child touches is made before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ST_CHECK(out >= 0, "cannot open the task log {}: {}", log.string(), std::strerror(errno));
  const std::string dir = cwd.string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the server died before prctl
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the server blocks SIGINT/SIGTERM in every thread
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    ::execv(args[0], args.data());
    const char msg[] = "seqtrain serve: cannot start the training process (execv failed)\n";
    [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  const int err = errno;
  ::close(out);
  ST_CHECK(pid > 0, "cannot start a training process: fork failed ({})", std::strerror(err));
  return pid;
}

std::optional<ExitStatus> try_reap(pid_t pid) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == 0) return std::nullopt;
  if (r < 0) return ExitStatus{.code = 255, .signal = 0};  // not our child (any more): treat as ended
  if (WIFSIGNALED(status)) return ExitStatus{.code = 128 + WTERMSIG(status), .signal = WTERMSIG(status)};
  return ExitStatus{.code = WEXITSTATUS(status), .signal = 0};
}

bool seqtrain_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') return false;  // a zombie
  std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
  std::string argv0;
  std::getline(cmd, argv0, '\0');
  return argv0.find("seqtrain") != std::string::npos;
}

}  // namespace seqtrain::serve
