// StepGraphs: see step_graphs.h.
#include "train/step_graphs.h"

#include <fmt/format.h>

namespace seqtrain {
namespace {

// Each shape's capture holds a graph and the arena layout of its step; a run with many shapes
// (a batch finder's probes, a fleet of sizes) keeps at most these, and runs the rest uncaptured.
constexpr size_t kMaxShapes = 8;

void add_shape(std::vector<int64_t>& key, const Tensor& t) {
  key.push_back(t.ptr ? static_cast<int64_t>(t.dtype) : -1);
  key.push_back(static_cast<int64_t>(t.shape.size()));
  key.insert(key.end(), t.shape.begin(), t.shape.end());
}

}  // namespace

StepGraphs::StepGraphs(Backend& backend, std::function<void(const std::string&)> note)
    : backend_(backend), note_(std::move(note)) {}

// A device error here has nobody left to tell (a destructor must not throw): the backend's
// teardown frees what a failed drop left.
StepGraphs::~StepGraphs() {
  for (auto& [key, e] : entries_) try {
      if (e.state == Entry::State::captured) backend_.drop(e.id);
    } catch (...) {
    }
}

void StepGraphs::say(const std::string& line) {
  if (note_ && said_.insert(line).second) note_("runtime.cuda_graphs: " + line);
}

StepGraphs::Entry* StepGraphs::entry(const Batch& host_batch) {
  if (host_batch.lengths.ptr || host_batch.key_padding_mask.ptr) {
    say("variable-length batches run uncaptured (the recurrent layers and token packing take each sample's length "
        "on the host)");
    return nullptr;
  }
  std::vector<int64_t> key;
  add_shape(key, host_batch.inputs);
  add_shape(key, host_batch.targets);
  add_shape(key, host_batch.loss_mask);
  const auto it = entries_.find(key);
  if (it != entries_.end()) return &it->second;
  if (entries_.size() == kMaxShapes) {
    say(fmt::format("more than {} batch shapes: the others run uncaptured", kMaxShapes));
    return nullptr;
  }
  return &entries_[key];
}

void StepGraphs::refuse(Entry& e, const std::string& why) {
  forget(e);
  e.state = Entry::State::refused;
  say(fmt::format("a batch shape runs uncaptured: {}", why));
}

void StepGraphs::forget(Entry& e) {
  if (e.state == Entry::State::captured) backend_.drop(e.id);
  e = Entry{};
  e.state = Entry::State::ready;
}

}  // namespace seqtrain
