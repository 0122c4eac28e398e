// Service: the training service without its HTTP face. It owns the task store, the templates
// and one scheduler thread that launches queued tasks as `seqtrain train` child processes (at
// most `jobs` at once, cores divided between them), reaps them, follows their metrics.jsonl
// for progress and best metric, and stops them. Every method is safe from any thread; the
// HTTP layer (server.h) only translates requests into these calls.
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/error.h"
#include "serve/task_store.h"

namespace seqtrain::serve {

// A request the service refuses: the HTTP status and a message naming what to fix (and the
// config key, when one is at fault).
struct RequestError : Error {
  RequestError(int status, const std::string& message, std::string key = {})
      : Error(message), status(status), key(std::move(key)) {}
  int status;
  std::string key;
};

struct ServiceOptions {
  std::filesystem::path root;    // everything the service reads or writes lies under it
  std::filesystem::path binary;  // the seqtrain executable its tasks run
  int jobs = 0;                  // tasks at once; 0 = sized from cores and memory
  int threads = 0;               // per task; 0 = the cores divided among the jobs
};

// The default job count: one task per two cores, and per 2 GiB of memory, at least one.
int default_jobs();

class Service {
 public:
  // Checks the root (a writable directory), opens <root>/tasks.db, marks tasks a crash left
  // running as interrupted and installs the default templates in a new root. Throws Error.
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  void start();  // the scheduler thread
  // Stops every running task (SIGTERM: each writes its `last` checkpoint), waits for them and
  // marks them interrupted, so a restarted server offers to resume them.
  void stop();

  nlohmann::json templates() const;
  // Validates with the CLI's loader and queues; returns the task id. Throws RequestError.
  int64_t submit(const std::string& template_name, const nlohmann::json& overrides);
  nlohmann::json tasks();
  nlohmann::json task(int64_t id);                 // RequestError 404 when absent
  nlohmann::json cancel(int64_t id);
  nlohmann::json resume(int64_t id);
  std::optional<TaskState> state(int64_t id);
  std::filesystem::path run_dir(int64_t id) const;  // <root>/tasks/<id>/run
  const std::filesystem::path& root() const { return opt_.root; }
  int jobs() const { return opt_.jobs; }
  int threads_per_task() const { return opt_.threads; }
  std::vector<std::string> notes() const { return notes_; }  // what the constructor did

 private:
  struct Running {
    pid_t pid = 0;
    double started_s = 0;
    int64_t epochs = 1, max_steps = 0;  // from the task's config, for progress
    int64_t steps_per_epoch = 0, epochs_done = 0, step = 0;
    std::streamoff metrics_offset = 0;
  };
  void loop();
  void reap_locked(double now, bool follow);
  void follow_locked(Task& t, Running& r);
  void launch_locked(double now);
  void finish_locked(Task& t, int code, int signal, double now);
  nlohmann::json to_json(const Task& t, double now) const;
  std::filesystem::path task_dir(int64_t id) const;

  ServiceOptions opt_;
  std::vector<std::string> notes_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool queue_changed_ = true;  // a submit, a resume or a freed slot since the last launch pass
  TaskStore store_;
  std::map<int64_t, Running> running_;
  std::thread thread_;
};

}  // namespace seqtrain::serve
