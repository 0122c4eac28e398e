#include "train/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_dir.h"
#include "io/safetensors.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
const char* kFiles[] = {"model.safetensors", "optimizer.safetensors"};
}

void save_checkpoint(const std::string& dir, const CheckpointData& data) {
  const fs::path final_dir(dir);
  fs::create_directories(final_dir.parent_path());
  const fs::path tmp = final_dir.parent_path() / (".tmp-" + final_dir.filename().string() + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  try {
    save_params((tmp / kFiles[0]).string(), *data.params);
    std::vector<FlatBuffer> bufs;
    nlohmann::json state = data.state;
    state["optimizer_step"] = data.optimizer.step;
    state["optimizer_buffers"] = nlohmann::json::array();
    for (const auto& [name, values] : data.optimizer.buffers) {
      ST_CHECK(values.size() == data.params->size(), "optimizer buffer '{}' does not match the parameter count", name);
      bufs.push_back({name + ".", values.data()});
      state["optimizer_buffers"].push_back(name);
    }
    save_flat((tmp / kFiles[1]).string(), *data.params, bufs);
    for (const char* f : kFiles) state["checksums"][f] = file_checksum((tmp / f).string());
    std::ofstream((tmp / "state.json").string()) << state.dump(2) << "\n";
    fsync_path((tmp / "state.json").string());
    publish_dir(tmp.string(), final_dir.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

nlohmann::json load_checkpoint(const std::string& dir, ParamStore& params, OptimizerState* optimizer) {
  const fs::path d(dir);
  const fs::path state_path = d / "state.json";
  ST_CHECK(fs::exists(state_path), "'{}' is not a checkpoint: it has no state.json (pass a checkpoints/<tag> directory)", dir);
  nlohmann::json state;
  try {
    std::ifstream f(state_path);
    state = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: state.json is not valid JSON ({}); the checkpoint is damaged, use another one", state_path.string(), e.what());
  }
  for (const char* f : kFiles) {
    const fs::path p = d / f;
    ST_CHECK(fs::exists(p), "checkpoint '{}' is missing {}; it is incomplete, use another checkpoint", dir, f);
    const std::string want = state.value("/checksums"_json_pointer / f, std::string());
    const std::string got = file_checksum(p.string());
    ST_CHECK(want == got, "checkpoint file '{}' fails its checksum (state.json says {}, file hashes to {}): it is "
             "damaged or was modified; use another checkpoint", p.string(), want, got);
  }
  // Load into a scratch store first, so a mismatched checkpoint leaves `params` untouched.
  ParamStore scratch;
  for (const auto& e : params.entries()) scratch.add(e.name, e.shape);
  scratch.finalize();
  load_params((d / kFiles[0]).string(), scratch);
  std::copy(scratch.params(), scratch.params() + scratch.size(), params.params());
  if (optimizer) {
    optimizer->step = state.value("optimizer_step", int64_t{0});
    optimizer->buffers.clear();
    std::vector<FlatBufferOut> outs;
    for (const auto& name : state.value("optimizer_buffers", std::vector<std::string>{}))
      optimizer->buffers[name].assign(params.size(), 0.f);
    for (auto& [name, values] : optimizer->buffers) outs.push_back({name + ".", values.data()});
    load_flat((d / kFiles[1]).string(), params, outs);
  }
  return state;
}

}  // namespace seqtrain
