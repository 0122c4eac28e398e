// TaskStore over SQLite. The schema is one table; user_version marks a file as ours, so a
// database some other program wrote is refused rather than altered.
#include "serve/task_store.h"

#include <sqlite3.h>

#include <array>

#include "core/error.h"

namespace seqtrain::serve {
namespace {

constexpr int kSchemaVersion = 1;
constexpr std::array<const char*, 6> kStateNames = {"queued", "running", "done", "failed", "cancelled", "interrupted"};
constexpr const char* kColumns =
    "id, template, overrides, state, resume, cancel_requested, created_s, started_s, ended_s, run_s, pid, "
    "exit_code, error, progress, best_name, best, launches";

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      fail("task database: cannot prepare '{}': {}", sql, sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  void bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(s_, i, v); }
  void bind(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), (int)v.size(), SQLITE_TRANSIENT); }
  // True while a row is available; throws on an error.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail("task database: {}", sqlite3_errmsg(db_));
  }
  int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
  double f64(int c) const { return sqlite3_column_double(s_, c); }
  std::string text(int c) const {
    const unsigned char* p = sqlite3_column_text(s_, c);
    return p ? std::string(reinterpret_cast<const char*>(p), (size_t)sqlite3_column_bytes(s_, c)) : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

Task read_task(const Stmt& s) {
  Task t;
  t.id = s.i64(0);
  t.template_name = s.text(1);
  t.overrides = s.text(2);
  t.state = parse_state(s.text(3)).value_or(TaskState::failed);
  t.resume = s.i64(4) != 0;
  t.cancel_requested = s.i64(5) != 0;
  t.created_s = s.f64(6);
  t.started_s = s.f64(7);
  t.ended_s = s.f64(8);
  t.run_s = s.f64(9);
  t.pid = s.i64(10);
  t.exit_code = (int)s.i64(11);
  t.error = s.text(12);
  t.progress = s.f64(13);
  t.best_name = s.text(14);
  t.best = s.f64(15);
  t.launches = s.i64(16);
  return t;
}

std::vector<Task> read_all(Stmt& s) {
  std::vector<Task> out;
  while (s.step()) out.push_back(read_task(s));
  return out;
}

}  // namespace

const char* state_name(TaskState s) { return kStateNames[(size_t)s]; }

std::optional<TaskState> parse_state(std::string_view name) {
  for (size_t i = 0; i < kStateNames.size(); ++i)
    if (name == kStateNames[i]) return (TaskState)i;
  return std::nullopt;
}

TaskStore::TaskStore(const std::filesystem::path& file) : file_(file) {
  const std::string fix = "move it aside (seqtrain never overwrites it) or start the server with another --root";
  if (sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail("task database '{}' cannot be opened ({}): is its directory writable? {}", file.string(), why, fix);
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    exec("SELECT count(*) FROM sqlite_master");  // the first read: a file that is not SQLite fails here
    int64_t version = -1, tables = 0;
    {
      Stmt v(db_, "PRAGMA user_version");
      if (v.step()) version = v.i64(0);
      Stmt n(db_, "SELECT count(*) FROM sqlite_master");
      if (n.step()) tables = n.i64(0);
    }
    if (tables > 0 && version != kSchemaVersion)
      fail("holds tables but is not a seqtrain task database (user_version {}, expected {})", version,
           kSchemaVersion);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    if (tables == 0) {
      exec("BEGIN");
      exec("CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, template TEXT NOT NULL, overrides TEXT NOT NULL, "
           "state TEXT NOT NULL, resume INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0, "
           "created_s REAL NOT NULL, started_s REAL NOT NULL DEFAULT 0, ended_s REAL NOT NULL DEFAULT 0, "
           "run_s REAL NOT NULL DEFAULT 0, pid INTEGER NOT NULL DEFAULT 0, exit_code INTEGER NOT NULL DEFAULT 0, "
           "error TEXT NOT NULL DEFAULT '', progress REAL NOT NULL DEFAULT 0, best_name TEXT NOT NULL DEFAULT '', "
           "best REAL NOT NULL DEFAULT 0, launches INTEGER NOT NULL DEFAULT 0)");
      exec("CREATE INDEX tasks_state ON tasks(state, id)");
      exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
      exec("COMMIT");
    }
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    fail("task database '{}' {}: {}", file.string(), e.what(), fix);
  }
}

TaskStore::~TaskStore() { sqlite3_close(db_); }

void TaskStore::exec(const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    const std::string why = msg ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    fail("is unusable ({})", why);
  }
}

int64_t TaskStore::add(const std::string& template_name, const std::string& overrides, double now_s) {
  Stmt s(db_, "INSERT INTO tasks (template, overrides, state, created_s) VALUES (?, ?, 'queued', ?)");
  s.bind(1, template_name);
  s.bind(2, overrides);
  s.bind(3, now_s);
  s.step();
  return sqlite3_last_insert_rowid(db_);
}

std::optional<Task> TaskStore::get(int64_t id) {
  Stmt s(db_, fmt::format("SELECT {} FROM tasks WHERE id = ?", kColumns).c_str());
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_task(s);
}

std::vector<Task> TaskStore::list() {
  Stmt s(db_, fmt::format("SELECT {} FROM tasks ORDER BY id", kColumns).c_str());
  return read_all(s);
}

std::vector<Task> TaskStore::in_state(TaskState state) {
  Stmt s(db_, fmt::format("SELECT {} FROM tasks WHERE state = ? ORDER BY id", kColumns).c_str());
  s.bind(1, std::string(state_name(state)));
  return read_all(s);
}

void TaskStore::update(const Task& t) {
  Stmt s(db_,
         "UPDATE tasks SET template=?, overrides=?, state=?, resume=?, cancel_requested=?, created_s=?, started_s=?, "
         "ended_s=?, run_s=?, pid=?, exit_code=?, error=?, progress=?, best_name=?, best=?, launches=? WHERE id=?");
  s.bind(1, t.template_name);
  s.bind(2, t.overrides);
  s.bind(3, std::string(state_name(t.state)));
  s.bind(4, (int64_t)t.resume);
  s.bind(5, (int64_t)t.cancel_requested);
  s.bind(6, t.created_s);
  s.bind(7, t.started_s);
  s.bind(8, t.ended_s);
  s.bind(9, t.run_s);
  s.bind(10, t.pid);
  s.bind(11, (int64_t)t.exit_code);
  s.bind(12, t.error);
  s.bind(13, t.progress);
  s.bind(14, t.best_name);
  s.bind(15, t.best);
  s.bind(16, t.launches);
  s.bind(17, t.id);
  s.step();
}

std::vector<Task> TaskStore::interrupt_running(double now_s) {
  std::vector<Task> running = in_state(TaskState::running);
  for (Task& t : running) {
    t.state = TaskState::interrupted;
    t.ended_s = now_s;
    t.error = "the server stopped while this task ran; resume it to continue from its last checkpoint";
    update(t);
  }
  return running;
}

}  // namespace seqtrain::serve
