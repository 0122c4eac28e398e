// TaskStore: the service's task queue, persisted in SQLite (WAL) at <root>/tasks.db so tasks
// survive a server restart. It holds what a task is (template, overrides, state, timing, the
// child's pid, progress and best metric) and nothing of the run itself: that lives in the
// task's run directory. One connection, used under the caller's lock (Service serialises).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace seqtrain::serve {

enum class TaskState { queued, running, done, failed, cancelled, interrupted };
const char* state_name(TaskState s);
std::optional<TaskState> parse_state(std::string_view name);
// Finished one way or another: nothing runs and nothing waits to run.
inline bool is_final(TaskState s) { return s != TaskState::queued && s != TaskState::running; }

struct Task {
  int64_t id = 0;
  std::string template_name;
  std::string overrides;        // JSON object {"train.epochs": "3", ...}, as submitted
  TaskState state = TaskState::queued;
  bool resume = false;          // the next launch continues the run from its checkpoint
  bool cancel_requested = false;
  double created_s = 0, started_s = 0, ended_s = 0;  // unix seconds; 0 = not yet
  double run_s = 0;             // seconds spent running, over every launch
  int64_t pid = 0;              // the child while running (and after a server crash)
  int exit_code = 0;
  std::string error;            // why it failed, in the trainer's words
  double progress = 0;          // 0..1
  std::string best_name;        // e.g. val_loss; empty until the first validation
  double best = 0;
  int64_t launches = 0;
};

class TaskStore {
 public:
  // Opens or creates the database. Throws seqtrain::Error, naming the file and a fix, when it
  // cannot be created or is not a seqtrain task database; such a file is never overwritten.
  explicit TaskStore(const std::filesystem::path& file);
  ~TaskStore();
  TaskStore(const TaskStore&) = delete;
  TaskStore& operator=(const TaskStore&) = delete;

  // Inserts a queued task and returns its id (ids grow: the queue's order).
  int64_t add(const std::string& template_name, const std::string& overrides, double now_s);
  std::optional<Task> get(int64_t id);
  std::vector<Task> list();                  // every task, by id
  std::vector<Task> in_state(TaskState s);   // by id: the queue order for `queued`
  void update(const Task& t);                // writes every column of row t.id
  // After a server crash: every task left `running` becomes `interrupted`. Returns them.
  std::vector<Task> interrupt_running(double now_s);

 private:
  void exec(const char* sql);
  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
};

}  // namespace seqtrain::serve
