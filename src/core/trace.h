// The tracer: spans of named work on each thread, recorded only inside a profiling window
// (`train --profile`, runtime.profile) and written as a Chrome trace (Perfetto,
// chrome://tracing). It lives in core/ so every layer can mark its work without reaching up
// into train/: a span is a local object, ST_TRACE("lstm.forward"). Off, a span costs one relaxed
// atomic load and a branch; its args (shapes) are only formatted when on.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace seqtrain::trace {

namespace detail {
extern std::atomic<bool> g_on;
int64_t now_ns();
void record(const char* name, const char* cat, int64_t t0_ns, int64_t t1_ns, std::string&& args);
}  // namespace detail

inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

class Span {
 public:
  explicit Span(const char* name, const char* cat = "op") : name_(on() ? name : nullptr), cat_(cat) {
    if (name_) t0_ = detail::now_ns();
  }
  // `args` returns the span's arguments as a JSON object's text (e.g. {"shape":"[64, 150, 4]"});
  // called only when tracing is on.
  template <typename F>
  Span(const char* name, const char* cat, F&& args) : Span(name, cat) {
    if (name_) args_ = std::forward<F>(args)();
  }
  ~Span() {
    if (name_) detail::record(name_, cat_, t0_, detail::now_ns(), std::move(args_));
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* name_;
  const char* cat_;
  int64_t t0_ = 0;
  std::string args_;
};

// {"shape":[2, 3]} (and "layer":k when k >= 0): a span's args for a layer's input.
std::string shape_args(const std::vector<int64_t>& shape, int64_t layer = -1);

// Names the calling thread's lane in the trace ("train", "loader 0", "checkpoint writer").
void set_thread_name(const std::string& name);

struct Event {
  const char* name;
  const char* cat;
  int64_t t0_ns, t1_ns;
  int tid;
  std::string args;
};

// One profiling window: start() turns every span on, stop() off and takes what was recorded.
// At most max_events are kept (later ones are counted as dropped), so a trace stays bounded.
class Window {
 public:
  explicit Window(int64_t max_events = 1'000'000) : max_events_(max_events) {}
  void start();
  // Returns the events, oldest first; safe while other threads still finish their spans.
  std::vector<Event> stop();
  bool active() const { return active_; }
  int64_t dropped() const { return dropped_; }
  int64_t start_ns() const { return start_ns_; }
  int64_t stop_ns() const { return stop_ns_; }

 private:
  int64_t max_events_;
  bool active_ = false;
  int64_t dropped_ = 0, start_ns_ = 0, stop_ns_ = 0;
};

// The Chrome trace format's JSON: one complete ("X") event per span, each thread's lane named.
std::string chrome_trace_json(const std::vector<Event>& events);

// "name  total ms  count  share" lines for the spans with the most total time: what the end of a
// profiled run prints.
std::vector<std::string> top_spans(const std::vector<Event>& events, double window_s, size_t n = 15);

}  // namespace seqtrain::trace

#define ST_TRACE_CAT2(a, b) a##b
#define ST_TRACE_CAT(a, b) ST_TRACE_CAT2(a, b)
// ST_TRACE("name") or ST_TRACE("name", "category", [&] { return args_json; })
#define ST_TRACE(...) ::seqtrain::trace::Span ST_TRACE_CAT(st_trace_span_, __LINE__)(__VA_ARGS__)
