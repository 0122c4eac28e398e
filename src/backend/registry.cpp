// The backend registry. See registry.h.
#include "backend/registry.h"

#include <mutex>
#include <vector>

#include "core/error.h"

namespace seqtrain {
namespace {

std::vector<BackendEntry>& entries() {
  static std::vector<BackendEntry> e = {cpu_backend_entry(), reference_backend_entry(), cuda_backend_entry()};
  return e;
}
std::mutex& entries_mutex() {
  static std::mutex m;
  return m;
}

bool serves(const BackendEntry& e, std::string_view name) {
  return e.prefix ? name.substr(0, e.name.size()) == e.name : name == e.name;
}

}  // namespace

void register_backend(BackendEntry entry) {
  std::lock_guard<std::mutex> lock(entries_mutex());
  for (const BackendEntry& e : entries())
    ST_CHECK(e.name != entry.name, "internal error: backend '{}' is registered twice", entry.name);
  entries().push_back(std::move(entry));
}

// Entries are only ever added (to a vector of a few), and the built-in ones exist before any
// lookup; an entry added while another thread looks one up is the caller's race to avoid.
const BackendEntry& backend_entry(std::string_view name) {
  for (const BackendEntry& e : entries())
    if (serves(e, name)) return e;
  std::string known;
  for (const BackendEntry& e : entries()) known += (known.empty() ? "" : ", ") + e.name + (e.prefix ? "..." : "");
  fail("runtime.backend '{}' is not known: use cpu or reference (and runtime.device for a GPU); registered: {}", name,
       known);
}

Backend& backend_named(std::string_view name) { return backend_entry(name).make(name); }

Backend& default_backend() { return backend_named("cpu"); }

int gpu_ordinal(const Backend& backend) {
  const BackendEntry& e = backend_entry(backend.name());
  return e.gpu_ordinal ? e.gpu_ordinal(backend.name()) : -1;
}

Precision resolve_precision(const std::string& word, std::string_view backend, std::string* why) {
  const BackendEntry& e = backend_entry(backend);
  return e.precision ? e.precision(word, backend, why) : resolve_precision(word, why);
}

}  // namespace seqtrain
