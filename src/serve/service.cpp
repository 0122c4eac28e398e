// Service: see service.h.
#include "serve/service.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "config/config.h"
#include "io/atomic_dir.h"
#include "serve/child_process.h"
#include "serve/paths.h"
#include "serve/templates.h"

namespace seqtrain::serve {
namespace fs = std::filesystem;
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A resumed task waits this long for the process a previous server left behind to write its
// checkpoint and exit (it got SIGTERM when that server died) before the launch gives up.
constexpr double kOrphanWaitS = 120;

fs::path checked_root(const fs::path& root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  ST_CHECK(fs::is_directory(root, ec), "--root {}: is not a directory and cannot be created ({}); pass a writable directory",
           root.string(), ec ? ec.message() : "a file is in the way");
  const fs::path real = fs::canonical(root);
  ST_CHECK(::access(real.c_str(), W_OK | X_OK) == 0,
           "--root {}: is not writable by this user; pass a directory you can write to (the service keeps its task "
           "database, templates and runs there)",
           root.string());
  return real;
}

// The last line of a task's log that says why it failed, else its last line.
std::string failure_reason(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find("error:") != std::string::npos) error = line;
  }
  const std::string& why = error.empty() ? last : error;
  return why.size() > 2000 ? why.substr(0, 2000) : why;
}

bool has_checkpoint(const fs::path& run) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run / "checkpoints", ec))
    if (e.is_directory(ec) && fs::exists(e.path() / "state.json", ec)) return true;
  return false;
}

}  // namespace

int default_jobs() {
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const double gib = (double)::sysconf(_SC_PHYS_PAGES) * (double)::sysconf(_SC_PAGE_SIZE) / (1024.0 * 1024 * 1024);
  return (int)std::max(1L, std::min(cores / 2, (long)(gib / 2)));
}

Service::Service(ServiceOptions options)
    : opt_([&] {
        options.root = checked_root(options.root);
        if (options.jobs <= 0) options.jobs = default_jobs();
        if (options.threads <= 0) {
          const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
          options.threads = (int)std::max(1L, cores / options.jobs);
        }
        return options;
      }()),
      store_(opt_.root / "tasks.db") {
  for (const Task& t : store_.interrupt_running(now_s()))
    notes_.push_back(fmt::format("task {} was running when the server stopped: marked interrupted", t.id));
  for (const std::string& w : install_default_templates(opt_.root)) notes_.push_back("wrote " + w);
  fs::create_directories(opt_.root / "tasks");
}

Service::~Service() { stop(); }

void Service::start() { thread_ = std::thread([this] { loop(); }); }

void Service::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

fs::path Service::task_dir(int64_t id) const { return opt_.root / "tasks" / std::to_string(id); }
fs::path Service::run_dir(int64_t id) const { return task_dir(id) / "run"; }

nlohmann::json Service::templates() const {
  nlohmann::json out = nlohmann::json::array();
  for (const TemplateInfo& t : list_templates(opt_.root / "templates")) {
    nlohmann::json fields = nlohmann::json::array();
    for (const TemplateField& f : t.fields)
      fields.push_back({{"key", f.key}, {"value", f.value}, {"default", f.default_value}, {"type", f.type},
                        {"doc", f.doc}, {"in_template", f.in_template}, {"path", f.path}});
    out.push_back({{"name", t.name}, {"description", t.description}, {"ok", t.error.empty()}, {"error", t.error},
                   {"fields", fields}});
  }
  return out;
}

int64_t Service::submit(const std::string& name, const nlohmann::json& overrides) {
  if (!valid_template_name(name))
    throw RequestError(400, fmt::format("'{}' is not a template name (letters, digits, _ - . ending .yaml)", name),
                       "template");
  const fs::path dir = opt_.root / "templates";
  std::string why;
  const fs::path file = resolve_inside(dir, name, &why);
  std::error_code ec;
  if (file.empty() || !fs::is_regular_file(file, ec))
    throw RequestError(404, fmt::format("no template '{}' in {}", name, dir.string()), "template");
  std::vector<std::string> args;
  try {
    args = override_args(overrides, opt_.root);
  } catch (const Error& e) {
    throw RequestError(400, e.what(), overrides.is_object() ? std::string() : "overrides");
  }
  std::string yaml;
  try {
    yaml = to_yaml(load_config(file.string(), args));
  } catch (const Error& e) {
    // The loader names the key; pass it on so the page can mark the field.
    std::string key;
    const std::string m = e.what();
    for (const auto& [k, v] : overrides.items())
      if (m.find("'" + k + "'") != std::string::npos || m.find(k + "=") != std::string::npos) key = k;
    throw RequestError(400, m, key);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = store_.add(name, overrides.dump(), now_s());
  try {
    fs::create_directories(run_dir(id));
    write_file_atomic((task_dir(id) / "config.yaml").string(), yaml);
  } catch (const std::exception& e) {
    Task t = *store_.get(id);
    t.state = TaskState::failed;
    t.error = fmt::format("cannot write the task directory {}: {}", task_dir(id).string(), e.what());
    store_.update(t);
    throw RequestError(500, t.error);
  }
  queue_changed_ = true;
  wake_.notify_all();
  return id;
}

nlohmann::json Service::to_json(const Task& t, double now) const {
  nlohmann::json overrides = nlohmann::json::parse(t.overrides, nullptr, false);
  const bool live = t.state == TaskState::running && t.started_s > 0;
  return {{"id", t.id},
          {"template", t.template_name},
          {"overrides", overrides.is_discarded() ? nlohmann::json::object() : overrides},
          {"state", state_name(t.state)},
          {"progress", t.progress},
          {"best_name", t.best_name},
          {"best", t.best_name.empty() || !std::isfinite(t.best) ? nlohmann::json() : nlohmann::json(t.best)},
          {"created_s", t.created_s},
          {"started_s", t.started_s},
          {"ended_s", t.ended_s},
          {"duration_s", t.run_s + (live ? now - t.started_s : 0.0)},
          {"exit_code", t.exit_code},
          {"error", t.error},
          {"launches", t.launches},
          {"resumable", (t.state == TaskState::interrupted || t.state == TaskState::cancelled ||
                         t.state == TaskState::failed) && has_checkpoint(run_dir(t.id))}};
}

nlohmann::json Service::tasks() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = now_s();
  nlohmann::json out = nlohmann::json::array();
  for (const Task& t : store_.list()) out.push_back(to_json(t, now));
  return out;
}

nlohmann::json Service::task(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<Task> t = store_.get(id);
  if (!t) throw RequestError(404, fmt::format("no task {}", id));
  nlohmann::json j = to_json(*t, now_s());
  j["run_dir"] = fmt::format("tasks/{}/run", id);
  std::error_code ec;
  nlohmann::json ckpts = nlohmann::json::array();
  for (const auto& e : fs::directory_iterator(run_dir(id) / "checkpoints", ec))
    if (e.is_directory(ec) && fs::exists(e.path() / "model.safetensors", ec))
      ckpts.push_back(e.path().filename().string());
  j["checkpoints"] = ckpts;
  return j;
}

std::optional<TaskState> Service::state(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<Task> t = store_.get(id);
  if (!t) return std::nullopt;
  return t->state;
}

nlohmann::json Service::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Task> t = store_.get(id);
  if (!t) throw RequestError(404, fmt::format("no task {}", id));
  if (t->state == TaskState::running) {
    t->cancel_requested = true;
    store_.update(*t);
    ::kill((pid_t)t->pid, SIGTERM);  // it finishes its step and writes `last`; reaped as cancelled
  } else if (t->state == TaskState::queued || t->state == TaskState::interrupted) {
    t->state = TaskState::cancelled;
    t->resume = t->resume || t->launches > 0;
    t->ended_s = now_s();
    store_.update(*t);
  } else {
    throw RequestError(409, fmt::format("task {} is {}: only a queued, running or interrupted task can be cancelled", id,
                                        state_name(t->state)));
  }
  return to_json(*t, now_s());
}

nlohmann::json Service::resume(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Task> t = store_.get(id);
  if (!t) throw RequestError(404, fmt::format("no task {}", id));
  if (t->state != TaskState::interrupted && t->state != TaskState::cancelled && t->state != TaskState::failed)
    throw RequestError(409, fmt::format("task {} is {}: only an interrupted, cancelled or failed task can be resumed",
                                        id, state_name(t->state)));
  // A process a previous server left behind may still be writing its checkpoint: the launch
  // waits for it. Otherwise the checkpoint must be there now.
  if (!seqtrain_alive((pid_t)t->pid) && !has_checkpoint(run_dir(id)))
    throw RequestError(409, fmt::format("task {} has no checkpoint to resume from ({} holds none): submit it again "
                                        "from its template",
                                        id, (run_dir(id) / "checkpoints").string()));
  t->state = TaskState::queued;
  t->resume = true;
  t->cancel_requested = false;
  t->error.clear();  // ended_s stays: a previous server's process gets kOrphanWaitS from then
  store_.update(*t);
  queue_changed_ = true;
  wake_.notify_all();
  return to_json(*t, now_s());
}

// ---- the scheduler ---------------------------------------------------------------------------

void Service::loop() {
  // A child's end is noticed within a tick (a task's wall time is what the user waits for);
  // its metrics are followed, and the database written, only every kFollowEvery ticks.
  constexpr auto kTick = std::chrono::milliseconds(10);
  constexpr int kFollowEvery = 25;
  std::unique_lock<std::mutex> lock(mu_);
  for (int tick = 0; !stopping_; ++tick) {
    const double now = now_s();
    reap_locked(now, tick % kFollowEvery == 0);
    if (queue_changed_ || tick % kFollowEvery == 0) {  // not a database query every tick
      queue_changed_ = false;
      launch_locked(now);
    }
    wake_.wait_for(lock, kTick);
  }
  // Shutdown: every child stops at a step boundary and writes `last`.
  for (auto& [id, r] : running_) ::kill(r.pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!running_.empty() && std::chrono::steady_clock::now() < deadline) {
    reap_locked(now_s(), false);
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    lock.lock();
  }
  for (auto& [id, r] : running_) ::kill(r.pid, SIGKILL);
  while (!running_.empty()) {
    reap_locked(now_s(), false);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Service::reap_locked(double now, bool follow) {
  for (auto it = running_.begin(); it != running_.end();) {
    const std::optional<ExitStatus> status = try_reap(it->second.pid);
    if (!status && !follow) {
      ++it;
      continue;
    }
    std::optional<Task> t = store_.get(it->first);
    if (t) follow_locked(*t, it->second);
    if (!status) {
      if (t) store_.update(*t);
      ++it;
      continue;
    }
    if (t) {
      t->run_s += now - it->second.started_s;
      finish_locked(*t, status->code, status->signal, now);
    }
    it = running_.erase(it);
    queue_changed_ = true;  // a slot is free
  }
}

void Service::finish_locked(Task& t, int code, int signal, double now) {
  t.exit_code = code;
  t.ended_s = now;
  const fs::path run = run_dir(t.id);
  if (code == 0) {
    t.state = TaskState::done;
    t.progress = 1;
    t.error.clear();
  } else if (t.cancel_requested) {
    t.state = TaskState::cancelled;
    t.error = "cancelled";
  } else if (stopping_) {
    t.state = TaskState::interrupted;
    t.error = "the server stopped while this task ran; resume it to continue from its last checkpoint";
  } else if (signal != 0 || code == 128 + SIGTERM || code == 128 + SIGINT) {
    t.state = TaskState::interrupted;
    t.error = fmt::format("stopped from outside the server ({}); resume it to continue from its last checkpoint",
                          signal ? fmt::format("signal {}", signal) : fmt::format("exit code {}", code));
  } else {
    t.state = TaskState::failed;
    t.error = failure_reason(run / "train.log");
  }
  t.cancel_requested = false;
  t.resume = true;  // any later launch continues this run directory
  // The run's own verdict on its best metric, when it wrote one.
  std::ifstream in(run / "summary.json");
  const nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
  if (!s.is_discarded() && s.is_object()) {
    const std::string monitor = s.value("monitor", std::string("val_loss"));
    const auto best = s.find("best_" + monitor);
    if (best != s.end() && best->is_number()) {
      t.best_name = monitor;
      t.best = best->get<double>();
    }
  }
  store_.update(t);
}

// Reads the lines the child appended to metrics.jsonl since the last look.
void Service::follow_locked(Task& t, Running& r) {
  std::ifstream in(run_dir(t.id) / "metrics.jsonl", std::ios::binary);
  if (!in) return;
  in.seekg(r.metrics_offset);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a line still being written: read it whole next time
    r.metrics_offset += (std::streamoff)line.size() + 1;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    const std::string split = j.value("split", std::string());
    const int64_t step = j.value("step", int64_t{0});
    r.step = std::max(r.step, step);
    if (split == "data") {
      r.epochs_done = j.value("epoch", int64_t{0}) + 1;
      r.steps_per_epoch = std::max<int64_t>(1, step / std::max<int64_t>(1, r.epochs_done));
    } else if (split == "val" && j.contains("loss") && j["loss"].is_number()) {
      const double v = j["loss"].get<double>();
      if (t.best_name != "val_loss" || v < t.best) {
        t.best_name = "val_loss";
        t.best = v;
      }
    }
  }
  double p = 0;
  if (r.max_steps > 0) p = (double)r.step / (double)r.max_steps;
  if (r.steps_per_epoch > 0) {
    const double partial = (double)(r.step - r.epochs_done * r.steps_per_epoch) / (double)r.steps_per_epoch;
    p = std::max(p, ((double)r.epochs_done + std::clamp(partial, 0.0, 1.0)) / (double)std::max<int64_t>(1, r.epochs));
  }
  t.progress = std::clamp(std::max(t.progress, p), 0.0, 1.0);
}

void Service::launch_locked(double now) {
  for (Task t : store_.in_state(TaskState::queued)) {
    if ((int)running_.size() >= opt_.jobs) return;
    const fs::path run = run_dir(t.id);
    if (t.resume) {
      if (seqtrain_alive((pid_t)t.pid)) {
        if (now - t.ended_s < kOrphanWaitS) continue;  // still writing its checkpoint
        t.state = TaskState::failed;
        t.error = fmt::format("the task's previous process {} is still running {} s after the server restarted; stop "
                              "it, then resume the task",
                              t.pid, (int)kOrphanWaitS);
        store_.update(t);
        continue;
      }
      if (!has_checkpoint(run)) {
        t.state = TaskState::failed;
        t.error = fmt::format("no checkpoint to resume from in {}: submit the task again", (run / "checkpoints").string());
        store_.update(t);
        continue;
      }
    }
    Running r;
    std::vector<std::string> argv = {opt_.binary.string(), "train"};
    try {
      const Config c = load_config((task_dir(t.id) / "config.yaml").string());
      r.epochs = c.train.epochs;
      r.max_steps = c.train.max_steps;
    } catch (const Error&) {  // the run's own start reports it in its log
    }
    if (t.resume) argv.insert(argv.end(), {"--resume", run.string()});
    else argv.insert(argv.end(), {(task_dir(t.id) / "config.yaml").string(), "--out", run.string()});
    argv.insert(argv.end(), {"--threads", std::to_string(opt_.threads)});
    try {
      fs::create_directories(run);
      r.pid = spawn_child(argv, run / "train.log", task_dir(t.id));
    } catch (const Error& e) {
      t.state = TaskState::failed;
      t.error = e.what();
      store_.update(t);
      continue;
    }
    r.started_s = now;
    t.state = TaskState::running;
    t.pid = r.pid;
    t.started_s = now;
    t.ended_s = 0;
    t.launches += 1;
    store_.update(t);
    running_[t.id] = r;
  }
}

}  // namespace seqtrain::serve
