// Malformed files, mutated by the thousand: every reader of a user's file (npy, safetensors,
// CSV, the YAML config, a checkpoint's state.json) given a valid file cut short at every length,
// with each header byte replaced by each of a few troublesome bytes, and with random bytes
// overwritten, either reads it or throws seqtrain::Error naming the file; never another
// exception (a bad_alloc from a length field believed, a json type_error), never a read past
// the mapping (run under ASan/UBSan: `SEQTRAIN_SANITIZE=ON`). Accepted mutants are read in
// full, so a header that passes but lies about the data shows up here too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <utility>
#include <string>
#include <typeinfo>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "data/csv.h"
#include "data/npy.h"
#include "io/safetensors.h"
#include "test_trainer_util.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace seqtrain {
namespace {

using testing::TempDir;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The valid file cut at every length up to `span` (and a few beyond), each of its first `span`
// bytes replaced by each troublesome byte, then `random` copies with 1 to 8 bytes overwritten at
// random anywhere. Deterministic: the same mutants every run.
std::vector<std::string> mutants(const std::string& valid, size_t span, int random) {
  std::vector<std::string> out;
  span = std::min(span, valid.size());
  for (size_t n = 0; n < span; ++n) out.push_back(valid.substr(0, n));
  for (size_t n : {valid.size() / 2, valid.size() - 1}) out.push_back(valid.substr(0, n));
  static const char kBytes[] = {'\0', '\xff', '\x80', '9', '-', '{', '"', ',', '\n', ' ', ':', '['};
  for (size_t i = 0; i < span; ++i)
    for (char b : kBytes)
      if (valid[i] != b) {
        std::string m = valid;
        m[i] = b;
        out.push_back(std::move(m));
      }
  std::mt19937_64 rng(20261128);
  for (int r = 0; r < random; ++r) {
    std::string m = valid;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
    out.push_back(std::move(m));
  }
  return out;
}

struct Tally {
  int accepted = 0, refused = 0;
  // Both outcomes seen: the mutants reached the reader's checks and its happy path.
  void expect_both() const {
    EXPECT_GT(refused, 0);
    EXPECT_GT(accepted, 0);
  }
};

// Writes each mutant to `path` and runs `read` on it: success, or an Error whose message names
// `name`; anything else is a test failure showing the mutant's index.
void run_mutants(const std::vector<std::string>& ms, const std::string& path, const std::string& name,
                 const std::function<void()>& read, Tally& tally) {
  for (size_t i = 0; i < ms.size(); ++i) {
    { std::ofstream(path, std::ios::binary | std::ios::trunc) << ms[i]; }
    try {
      read();
      ++tally.accepted;
    } catch (const Error& e) {
      ++tally.refused;
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
          << "mutant " << i << " refused without naming " << name << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << i << " of " << name << " threw " << typeid(e).name() << ", not a seqtrain::Error: "
                    << e.what();
    }
  }
}

TEST(MalformedInputs, NpyFilesAreReadOrRefusedByName) {
  TempDir dir;
  const std::string path = dir / "x.npy";
  std::vector<float> values(3 * 5 * 2);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i);
  const std::string valid = npy_bytes_f32({3, 5, 2}, values.data(), path);
  Tally tally;
  run_mutants(mutants(valid, 140, 400), path, "x.npy", [&] {
    const NpyArray a = open_npy(path);
    // What the header promises must lie inside the mapping.
    ASSERT_LE(static_cast<size_t>(a.data_offset + a.count * a.itemsize), a.map->size);
    std::vector<float> all(static_cast<size_t>(a.count));
    a.read_floats(0, a.count, all.data());
  }, tally);
  tally.expect_both();  // the data bytes' mutants are still valid files
}

TEST(MalformedInputs, SafetensorsFilesAreReadOrRefusedByName) {
  TempDir dir;
  const std::string path = dir / "w.safetensors";
  std::vector<float> a(6), b(4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) - 2.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0f / static_cast<float>(i + 1);
  write_safetensors(path, {NamedTensor::from_f32("layer.weight", {2, 3}, a.data()),
                           NamedTensor::from_f32("layer.bias", {4}, b.data())},
                    {{"format", "pt"}});
  const std::string valid = file_bytes(path);
  Tally tally;
  run_mutants(mutants(valid, valid.size() - 40, 400), path, "w.safetensors", [&] {
    const SafetensorsFile f = read_safetensors(path);
    for (const NamedTensor& t : f.tensors) {
      ASSERT_EQ(t.bytes.size(), static_cast<size_t>(t.numel()) * st_dtype_size(t.dtype)) << t.name;
      if (t.dtype == StDType::F32 || t.dtype == StDType::F16 || t.dtype == StDType::BF16 || t.dtype == StDType::F64) {
        EXPECT_EQ(t.to_f32().size(), static_cast<size_t>(t.numel()));
      }
    }
  }, tally);
  tally.expect_both();
}

TEST(MalformedInputs, CsvFilesAreReadOrRefusedByName) {
  TempDir dir;
  const std::string path = dir / "load.csv";
  std::string valid = "time,id,a,b\n";
  for (int i = 0; i < 12; ++i)
    valid += "2024-01-" + std::string(i + 1 < 10 ? "0" : "") + std::to_string(i + 1) + "," + (i < 6 ? "s1" : "s2") +
             "," + std::to_string(i * 1.5) + "," + std::to_string(10 - i) + "\n";
  Tally tally;
  for (const char* nan_policy : {"error", "ffill", "drop"})
    run_mutants(mutants(valid, valid.size(), 200), path, "load.csv", [&] {
      const Series s = read_csv(path, {"a", "b"}, nan_policy, "time", "id");
      ASSERT_EQ(s.values.size(), static_cast<size_t>(s.rows) * s.columns.size());
      for (const SeriesSegment& seg : s.segments) ASSERT_LE(seg.end, s.rows);
    }, tally);
  tally.expect_both();
}

TEST(MalformedInputs, ConfigFilesAreReadOrRefusedByName) {
  TempDir dir;
  const std::string path = dir / "run.yaml";
  const std::string valid = file_bytes(testing::source_dir() + "/examples/forecast.yaml");
  ASSERT_FALSE(valid.empty());
  Tally tally;
  run_mutants(mutants(valid, std::min<size_t>(valid.size(), 600), 300), path, "run.yaml",
              [&] { (void)to_yaml(load_config(path)); }, tally);
  tally.expect_both();  // comments and values that stay in range
}

TEST(MalformedInputs, CheckpointStateIsReadWholeOrRefusedByName) {
  TempDir dir;
  const std::string ckpt = dir / "best";
  std::filesystem::create_directories(ckpt);
  const std::string path = ckpt + "/state.json";
  nlohmann::json state = nlohmann::json::parse(
      R"({"updates": 12, "epoch": 3, "config_hash": "abc", "checksums": {"model.safetensors": "0123"}, )"
      R"("best_val": 0.5, "time_s": 1.25, "io": {"x": [4, 2]}, "tag": "best"})");
  seal_checkpoint_state(state);
  const std::string valid = state.dump(2);
  Tally tally;
  // Sealed, a mutant that still parses is refused by its checksum unless its values are the
  // state's: a space became a newline, or the damage renamed the seal's own key (the state then
  // reads as one written before the seal, its values intact). No edited value gets through.
  nlohmann::json values = state;
  values.erase("state_checksum");
  run_mutants(mutants(valid, valid.size(), 300), path, "state.json", [&] {
    nlohmann::json got = read_checkpoint_state(ckpt);
    for (auto it = got.begin(); it != got.end();) it = values.contains(it.key()) ? std::next(it) : got.erase(it);
    EXPECT_EQ(got, values);
  }, tally);
  tally.expect_both();
  state["epoch"] = 4;  // valid JSON, edited without sealing
  testing::write_file(dir, "best/state.json", state.dump(2));
  EXPECT_NE(testing::error_of([&] { read_checkpoint_state(ckpt); }).find("fails its own checksum"), std::string::npos);
  state.erase("state_checksum");  // a state written before the seal existed is read as it is
  testing::write_file(dir, "best/state.json", state.dump(2));
  EXPECT_EQ(read_checkpoint_state(ckpt), state);
  testing::write_file(dir, "best/state.json", "[1, 2]");
  EXPECT_NE(testing::error_of([&] { read_checkpoint_state(ckpt); }).find("where an object belongs"), std::string::npos);
}

// The commands that read a run's checkpoint, given a state.json edited into valid JSON of the
// wrong types: each refuses with the file's name and exit code 2 (not an internal error, 3).
// A four-step forecaster run in `run`; false (with the output reported) when training failed.
bool tiny_run(const std::string& run) {
  const testing::cli::Result trained = testing::cli::run_seqtrain(
      "train " + testing::cli::example_config() + testing::cli::kSmall + " --out " + run +
      " --set train.epochs=1 --set train.max_steps=4 --set train.schedule.warmup_steps=1 --quiet");
  EXPECT_EQ(trained.rc, 0) << trained.out;
  return trained.rc == 0;
}

TEST(MalformedInputs, CommandsRefuseAnEditedCheckpointState) {
  TempDir dir;
  const std::string run = dir / "run";
  ASSERT_TRUE(tiny_run(run));
  const std::string state_path = run + "/checkpoints/last/state.json";
  const nlohmann::json good = nlohmann::json::parse(file_bytes(state_path));
  ASSERT_TRUE(good.contains("state_checksum"));
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"updates", [](nlohmann::json& s) { s["updates"] = "x"; }},
      {"tag", [](nlohmann::json& s) { s["tag"] = nullptr; }},
      {"normalizer", [](nlohmann::json& s) { s.erase("normalizer"); }},
      {"model_spec", [](nlohmann::json& s) { s["model_spec"] = 7; }},
  };
  for (const auto& [what, edit] : edits) {
    nlohmann::json bad = good;
    edit(bad);
    for (const char* tag : {"last", "best"})
      testing::write_file(dir, std::string("run/checkpoints/") + tag + "/state.json", bad.dump(2));
    for (const std::string& cmd : {"eval " + run, "export " + run + " --out " + (dir / "exported"),
                                   "train " + run + "/config.yaml --resume " + run + " --set train.max_steps=6"}) {
      const testing::cli::Result r = testing::cli::run_seqtrain(cmd);
      EXPECT_EQ(r.rc, 2) << what << ": " << cmd << "\n" << r.out;
      EXPECT_NE(r.out.find("state.json fails its own checksum"), std::string::npos) << what << ": " << cmd << "\n" << r.out;
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "exported")) << "an export of a damaged checkpoint wrote something";
  }
}

// An export's config.json edited into valid JSON of the wrong types or values: exporting it again
// (load_model, as every command that reads an export) refuses naming config.json, exit code 2.
TEST(MalformedInputs, AnEditedExportIsRefusedNamingItsConfig) {
  TempDir dir;
  const std::string run = dir / "run", exported = dir / "exp";
  ASSERT_TRUE(tiny_run(run));
  const testing::cli::Result made = testing::cli::run_seqtrain("export " + run + " --out " + exported);
  ASSERT_EQ(made.rc, 0) << made.out;
  const nlohmann::json good = nlohmann::json::parse(file_bytes(exported + "/config.json"));
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"precision", [](nlohmann::json& c) { c["precision"] = 7; }},
      {"checksums", [](nlohmann::json& c) { c["checksums"] = nlohmann::json::array(); }},
      {"model_spec", [](nlohmann::json& c) { c["model_spec"] = "lstm"; }},
      {"model_spec.hidden", [](nlohmann::json& c) { c["model_spec"]["hidden"] = -1; }},
      {"model_spec.backend", [](nlohmann::json& c) { c["model_spec"]["backend"] = "x"; }},
  };
  for (const auto& [what, edit] : edits) {
    nlohmann::json bad = good;
    edit(bad);
    testing::write_file(dir, "exp/config.json", bad.dump(2));
    const testing::cli::Result r = testing::cli::run_seqtrain("export " + exported + " --out " + (dir / "again"));
    EXPECT_EQ(r.rc, 2) << what << "\n" << r.out;
    EXPECT_NE(r.out.find("config.json"), std::string::npos) << what << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "again")) << what;
  }
}

// Sizes past what this machine can do are bad input too: refused with the key and exit code 2,
// never a crash (100,000 OpenMP threads crashed libgomp) or an "internal error" (bad_alloc).
TEST(MalformedInputs, SizesBeyondTheMachineAreRefusedNamingTheKey) {
  TempDir dir;
  const std::string base = "train " + testing::cli::example_config() + testing::cli::kSmall + " --out " + (dir / "run");
  const testing::cli::Result threads = testing::cli::run_seqtrain(base + " --set runtime.threads=100000");
  EXPECT_EQ(threads.rc, 2) << threads.out;
  EXPECT_NE(threads.out.find("'runtime.threads' expects an integer in [0, 256]"), std::string::npos) << threads.out;
  const testing::cli::Result omp =
      testing::cli::run_seqtrain(base + " --set runtime.threads=0", "OMP_NUM_THREADS=100000");
  EXPECT_EQ(omp.rc, 2) << omp.out;
  EXPECT_NE(omp.out.find("OMP_NUM_THREADS=100000 asks for more than 256"), std::string::npos) << omp.out;
  // (A sanitizer build's allocator aborts on such a size unless told to return null as malloc does.)
  const testing::cli::Result huge = testing::cli::run_seqtrain(base + " --set model.hidden=100000000",
                                                               "ASAN_OPTIONS=allocator_may_return_null=1");
  EXPECT_EQ(huge.rc, 2) << huge.out;
  EXPECT_NE(huge.out.find("model.hidden"), std::string::npos) << huge.out;
  EXPECT_EQ(huge.out.find("internal error"), std::string::npos) << huge.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "a refused run left a directory";
}

}  // namespace
}  // namespace seqtrain
