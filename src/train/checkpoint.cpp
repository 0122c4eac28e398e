#include "train/checkpoint.h"
#include "core/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/backend.h"
#include "core/finite.h"
#include "core/fnv1a.h"
#include "core/text.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
const char* kFiles[] = {"model.safetensors", "optimizer.safetensors"};
const char* kAllFiles[] = {"model.safetensors", "optimizer.safetensors", "state.json"};
// optimizer.safetensors' tensors of the trained weights beside model.safetensors' average.
constexpr const char* kRawPrefix = "raw.";

// A per-process temporary name next to `final_dir`, hidden (dot) so listings skip it and
// recover_checkpoints() knows to remove it.
fs::path tmp_dir_for(const fs::path& final_dir) {
  return final_dir.parent_path() / (".tmp-" + final_dir.filename().string() + "-" + std::to_string(::getpid()));
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
}  // namespace

void save_checkpoint(const std::string& dir, const CheckpointData& data) {
  const fs::path final_dir(dir);
  fs::create_directories(final_dir.parent_path());
  const fs::path tmp = tmp_dir_for(final_dir);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  try {
    save_params((tmp / kFiles[0]).string(), *data.params);
    std::vector<FlatBuffer> bufs;
    nlohmann::json state = data.state;
    state["optimizer_step"] = data.optimizer.step;
    state["optimizer_buffers"] = nlohmann::json::array();
    // Per-range update counts, only once parameter groups made them differ (optim/optimizer.h).
    if (!data.optimizer.param_steps.empty()) {
      nlohmann::json counts = nlohmann::json::array();
      for (const StepCount& c : data.optimizer.param_steps) counts.push_back({c.begin, c.end, c.steps});
      state["optimizer_param_steps"] = counts;
    }
    for (const auto& [name, values] : data.optimizer.buffers) {
      ST_CHECK(values.size() == data.params->size(), "optimizer buffer '{}' does not match the parameter count", name);
      bufs.push_back({name + ".", values.data()});
      state["optimizer_buffers"].push_back(name);
    }
    if (!data.raw.empty()) {
      ST_CHECK(data.raw.size() == data.params->size(), "the trained weights do not match the parameter count");
      bufs.push_back({std::string(kRawPrefix), data.raw.data()});
      state["raw_weights"] = true;
    }
    save_flat((tmp / kFiles[1]).string(), *data.params, bufs);
    for (const char* f : kFiles) state["checksums"][f] = file_checksum((tmp / f).string());
    seal_checkpoint_state(state);
    {
      std::ofstream out((tmp / "state.json").string());
      out << state.dump(2) << "\n";
      out.close();
      ST_CHECK(out.good(), "writing '{}' failed (disk full?); the previous checkpoint '{}' is untouched",
               (tmp / "state.json").string(), dir);
    }
    fsync_path((tmp / "state.json").string());
    publish_dir(tmp.string(), final_dir.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

namespace {
constexpr const char* kStateChecksum = "state_checksum";

// The hash of `state` less its own checksum, over its compact dump (keys sorted, numbers in
// their shortest round-trip form, so a parsed state dumps to the same text as the saved one).
std::string state_hash(nlohmann::json state) {
  state.erase(kStateChecksum);
  return fmt::format("{:016x}", fnv1a(state.dump()));
}

bool looks_like_checksum(const nlohmann::json& v) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}
}  // namespace

void seal_checkpoint_state(nlohmann::json& state) { state[kStateChecksum] = state_hash(state); }

nlohmann::json read_checkpoint_state(const std::string& dir) {
  const fs::path state_path = fs::path(dir) / "state.json";
  ST_CHECK(fs::exists(state_path), "'{}' is not a checkpoint: it has no state.json (pass a checkpoints/<tag> directory)", dir);
  nlohmann::json state;
  try {
    std::ifstream f(state_path);
    state = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: state.json is not valid JSON ({}); the checkpoint is damaged, use another one", state_path.string(), e.what());
  }
  ST_CHECK(state.is_object(),
           "{}: state.json holds {} where an object belongs; the checkpoint is damaged, use another one",
           state_path.string(), state.type_name());
  if (!state.contains(kStateChecksum)) {
    // Written before the seal, or damage renamed the seal's key, which then still holds its 16
    // hex digits beside the config's hash (the only other top-level value of that form).
    for (const auto& [key, value] : state.items())
      ST_CHECK(key == "config_hash" || !looks_like_checksum(value),
               "{}: state.json has no '{}' but a '{}' holding a checksum: the file is damaged; use another checkpoint "
               "(checkpoints/best, last or step-<N>)", state_path.string(), kStateChecksum, key);
  } else {
    const nlohmann::json& said = state[kStateChecksum];
    const std::string want = said.is_string() ? said.get<std::string>() : said.dump();
    const std::string got = state_hash(state);
    ST_CHECK(want == got,
             "{}: state.json fails its own checksum (it says {}, its content hashes to {}): it was damaged or edited "
             "after the run wrote it; use another checkpoint (checkpoints/best, last or step-<N>)",
             state_path.string(), want, got);
  }
  return state;
}

namespace {
// Throws unless dir/f exists and hashes to the checksum state.json gives it.
void verify_file(const std::string& dir, const nlohmann::json& state, const char* f) {
  const fs::path p = fs::path(dir) / f;
  ST_CHECK(fs::exists(p), "checkpoint '{}' is missing {}; it is incomplete, use another checkpoint", dir, f);
  const std::string want = state.value("/checksums"_json_pointer / f, std::string());
  const std::string got = file_checksum(p.string());
  ST_CHECK(want == got, "checkpoint file '{}' fails its checksum (state.json says {}, file hashes to {}): it is "
           "damaged or was modified; use another checkpoint", p.string(), want, got);
}
}  // namespace

std::string verified_model_file(const std::string& dir) {
  verify_file(dir, read_checkpoint_state(dir), kFiles[0]);
  return (fs::path(dir) / kFiles[0]).string();
}

nlohmann::json load_checkpoint(const std::string& dir, ParamStore& params, OptimizerState* optimizer,
                               std::vector<float>* raw) {
  const fs::path d(dir);
  nlohmann::json state = read_checkpoint_state(dir);
  for (const char* f : kFiles) verify_file(dir, state, f);
  // load_params checks every tensor before it writes any, so a mismatched checkpoint leaves
  // `params` untouched.
  load_params((d / kFiles[0]).string(), params);
  if (optimizer) {
    optimizer->step = state.value("optimizer_step", int64_t{0});
    optimizer->buffers.clear();
    optimizer->param_steps.clear();  // absent (every element at `step`) in older checkpoints
    try {
      for (const auto& c : state.value("optimizer_param_steps", nlohmann::json::array()))
        optimizer->param_steps.push_back({c.at(0).get<size_t>(), c.at(1).get<size_t>(), c.at(2).get<int64_t>()});
    } catch (const nlohmann::json::exception& e) {
      fail("{}: state.json's optimizer_param_steps is not a list of [begin, end, steps] ({}); the checkpoint is "
           "damaged, use another one", dir, e.what());
    }
    std::vector<FlatBufferOut> outs;
    for (const auto& name : state.value("optimizer_buffers", std::vector<std::string>{}))
      optimizer->buffers[name].assign(params.size(), 0.f);
    for (auto& [name, values] : optimizer->buffers) outs.push_back({name + ".", values.data()});
    // The file holds exactly what was saved, so the trained weights are read even when the
    // caller does not want them.
    std::vector<float> unwanted;
    std::vector<float>& trained = raw ? *raw : unwanted;
    trained.clear();
    if (state.value("raw_weights", false)) {
      trained.assign(params.size(), 0.f);
      outs.push_back({kRawPrefix, trained.data()});
    }
    load_flat((d / kFiles[1]).string(), params, outs);
  }
  return state;
}

std::string step_tag(int64_t updates) { return "step-" + std::to_string(updates); }

std::vector<std::pair<int64_t, std::string>> list_step_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!starts_with(name, "step-") || !e.is_directory()) continue;
    int64_t n = -1;
    const char* b = name.data() + 5;
    const char* end = name.data() + name.size();
    auto [p, err] = std::from_chars(b, end, n);
    if (err != std::errc() || p != end || b == end || n < 0) continue;  // not ours: leave it alone
    out.emplace_back(n, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void link_checkpoint(const std::string& src, const std::string& dst) {
  const fs::path tmp = tmp_dir_for(fs::path(dst));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  try {
    for (const char* f : kAllFiles) {
      const fs::path from = fs::path(src) / f, to = tmp / f;
      fs::create_hard_link(from, to, ec);
      if (ec) {
        // Some filesystems (FAT, some network mounts) have no hard links: copy instead.
        fs::copy_file(from, to, fs::copy_options::overwrite_existing);
        fsync_path(to.string());
      }
    }
    publish_dir(tmp.string(), dst);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

void prune_step_checkpoints(const std::string& ckpt_dir, int64_t keep, const std::string& protect) {
  if (keep <= 0) return;
  auto steps = list_step_checkpoints(ckpt_dir);
  if (static_cast<int64_t>(steps.size()) <= keep) return;
  steps.resize(steps.size() - static_cast<size_t>(keep));  // the older ones
  for (const auto& [n, path] : steps) {
    if (fs::path(path).filename() == protect) continue;
    const fs::path doomed = fs::path(ckpt_dir) / (".tmp-prune-" + fs::path(path).filename().string() + "-" +
                                                   std::to_string(::getpid()));
    std::error_code ec;
    fs::rename(path, doomed, ec);
    if (ec) continue;  // gone already or not ours to move; never fail training over pruning
    fs::remove_all(doomed, ec);
  }
}

std::vector<std::string> recover_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::string> notes;
  std::error_code ec;
  std::vector<fs::path> tmps, olds;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (starts_with(name, ".tmp-")) tmps.push_back(e.path());
    else if (starts_with(name, ".old-")) olds.push_back(e.path());
  }
  for (const auto& p : tmps) {
    fs::remove_all(p, ec);
    notes.push_back(fmt::format("removed '{}', an unfinished checkpoint write or delete", p.string()));
  }
  for (const auto& p : olds) {
    const fs::path tag = p.parent_path() / p.filename().string().substr(5);
    if (!fs::exists(tag) && fs::exists(p / "state.json")) {
      // The crash fell between moving the previous <tag> aside and renaming the new one in:
      // the previous one is whole, so it becomes <tag> again.
      fs::rename(p, tag, ec);
      ST_CHECK(!ec, "cannot restore '{}' as '{}': {}; rename it by hand", p.string(), tag.string(), ec.message());
      fsync_path(ckpt_dir);
      notes.push_back(fmt::format("restored '{}' from '{}' (a crash interrupted its replacement)", tag.string(),
                                  p.string()));
    } else {
      fs::remove_all(p, ec);
      notes.push_back(fmt::format("removed '{}', left over from replacing '{}'", p.string(), tag.string()));
    }
  }
  return notes;
}

namespace {
// Weights that are no longer numbers (a step whose loss or gradients were NaN or inf) are never
// written, least of all over `last`: the run stops with the checkpoints before them intact.
void refuse_non_finite(const ParamStore& snapshot, const std::string& dir) {
  const float* p = snapshot.params();
  if (first_non_finite(p, static_cast<int64_t>(snapshot.size())) < 0) return;
  for (const ParamEntry& e : snapshot.entries())
    if (const int64_t k = first_non_finite(p + e.offset, numel_of(e.shape)); k >= 0)
      fail("checkpoint '{}' is not written: parameter '{}' holds {} at element {}. Training diverged (a loss or "
           "gradient became NaN or inf), and the checkpoints before it are kept. Lower train.optimizer.lr or set "
           "train.grad_clip, check the data for extreme values, then resume from the last good checkpoint "
           "(--resume) or start again",
           dir, e.name, value_text(p[e.offset + static_cast<size_t>(k)]), k);
}
}  // namespace

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::submit(WriteJob job, const ParamStore& params, OptimizerState optimizer, nlohmann::json state,
                              std::vector<float> raw) {
  wait();
  // The snapshot is host memory (the CPU backend's), which the writer thread reads while training
  // goes on; taking it is one copy (a memcpy, or a download from a device backend).
  ST_TRACE("checkpoint.snapshot", "io");
  if (!snapshot_) snapshot_ = std::make_unique<ParamStore>(params.clone_layout(default_backend()));
  params.read_params(std::span<float>(snapshot_->params(), snapshot_->size()));
  refuse_non_finite(*snapshot_, job.dir);
  opt_ = std::move(optimizer);
  raw_ = std::move(raw);
  thread_ = std::thread([this, job = std::move(job), state = std::move(state)] {
    trace::set_thread_name("checkpoint writer");
    ST_TRACE("checkpoint.write", "io");
    try {
      save_checkpoint(job.dir, CheckpointData{snapshot_.get(), opt_, state, raw_});
      if (!job.link_last.empty()) link_checkpoint(job.dir, job.link_last);
      if (!job.prune_in.empty()) prune_step_checkpoints(job.prune_in, job.keep, job.protect);
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  });
}

void CheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (!error_.empty()) {
    std::string e = std::move(error_);
    error_.clear();
    fail("writing a checkpoint failed: {}", e);
  }
}

}  // namespace seqtrain
