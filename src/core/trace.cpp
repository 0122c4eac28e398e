// The tracer: see trace.h. Each thread appends to its own buffer (a mutex it almost never
// shares: only stop() takes it from another thread); the buffers outlive their threads, so a
// loader worker that exits mid-window loses nothing.
#include "core/trace.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <mutex>

namespace seqtrain::trace {
namespace {

struct ThreadBuffer {
  std::mutex mu;
  std::vector<Event> events;
  int tid = 0;
  std::string name;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::atomic<int64_t> budget{0};   // events still allowed in this window
  std::atomic<int64_t> dropped{0};
};

Registry& registry() {
  static Registry r;
  return r;
}

ThreadBuffer& my_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> mine = [] {
    auto b = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    b->tid = static_cast<int>(r.buffers.size()) + 1;
    b->name = "thread " + std::to_string(b->tid);
    r.buffers.push_back(b);
    return b;
  }();
  return *mine;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

}  // namespace

namespace detail {
std::atomic<bool> g_on{false};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(const char* name, const char* cat, int64_t t0_ns, int64_t t1_ns, std::string&& args) {
  Registry& r = registry();
  if (r.budget.fetch_sub(1, std::memory_order_relaxed) <= 0) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadBuffer& b = my_buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.events.push_back(Event{name, cat, t0_ns, t1_ns, b.tid, std::move(args)});
}
}  // namespace detail

std::string shape_args(const std::vector<int64_t>& shape, int64_t layer) {
  std::string out = "{\"shape\":[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  out += "]";
  if (layer >= 0) out += ",\"layer\":" + std::to_string(layer);
  return out + "}";
}

void set_thread_name(const std::string& name) {
  ThreadBuffer& b = my_buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.name = name;
}

void Window::start() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) {
      std::lock_guard<std::mutex> bl(b->mu);
      b->events.clear();
    }
  }
  r.budget.store(max_events_);
  r.dropped.store(0);
  start_ns_ = detail::now_ns();
  active_ = true;
  detail::g_on.store(true);
}

std::vector<Event> Window::stop() {
  detail::g_on.store(false);
  stop_ns_ = detail::now_ns();
  active_ = false;
  Registry& r = registry();
  std::vector<Event> out;
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    for (Event& e : b->events) out.push_back(std::move(e));
    b->events.clear();
  }
  dropped_ = r.dropped.load();
  std::sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.t0_ns != b.t0_ns ? a.t0_ns < b.t0_ns : a.t1_ns > b.t1_ns;  // parents before children
  });
  return out;
}

std::string chrome_trace_json(const std::vector<Event>& events) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  const int64_t base = events.empty() ? 0 : events.front().t0_ns;
  std::map<int, std::string> lanes;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) {
      std::lock_guard<std::mutex> bl(b->mu);
      lanes[b->tid] = b->name;
    }
  }
  bool first = true;
  std::map<int, bool> used;
  for (const Event& e : events) {
    used[e.tid] = true;
    out += fmt::format("{}{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3f},\"dur\":{:.3f}",
                       first ? "" : ",\n", escape(e.name), escape(e.cat), e.tid, (e.t0_ns - base) / 1e3,
                       (e.t1_ns - e.t0_ns) / 1e3);
    if (!e.args.empty()) out += ",\"args\":" + e.args;
    out += "}";
    first = false;
  }
  for (const auto& [tid, name] : lanes) {
    if (!used.count(tid)) continue;
    out += fmt::format("{}{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
                       first ? "" : ",\n", tid, escape(name));
    first = false;
  }
  out += "\n]}\n";
  return out;
}

std::vector<std::string> top_spans(const std::vector<Event>& events, double window_s, size_t n) {
  struct Total {
    double s = 0;
    int64_t count = 0;
  };
  std::map<std::string, Total> by;
  for (const Event& e : events) {
    Total& t = by[e.name];
    t.s += (e.t1_ns - e.t0_ns) / 1e9;
    ++t.count;
  }
  std::vector<std::pair<std::string, Total>> rows(by.begin(), by.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.s > b.second.s; });
  std::vector<std::string> out;
  out.push_back(fmt::format("{:<28} {:>10} {:>8} {:>8}", "span", "total ms", "count", "of wall"));
  for (size_t i = 0; i < rows.size() && i < n; ++i)
    out.push_back(fmt::format("{:<28} {:>10.2f} {:>8} {:>7.1f}%", rows[i].first, rows[i].second.s * 1e3,
                              rows[i].second.count, window_s > 0 ? 100 * rows[i].second.s / window_s : 0.0));
  return out;
}

}  // namespace seqtrain::trace
