// runtime.tensorboard: the events file (src/obs/tensorboard.h) and its observer
// (src/train/tensorboard_observer.h). The checksum against CRC-32C's check value, the framing
// and encoding against bytes built here by other code (a bitwise CRC, hand-written protobuf);
// then whole runs read back by a reader written here (framing, both CRCs, the protobuf fields)
// and compared with metrics.jsonl record by record: a plain run, a run resumed after kill -9
// with flushed records past its checkpoint (the resumed run cuts them and opens a file that
// starts with file_version and a SessionLog START), and a run directory that became unwritable
// (refused before anything is touched).
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "core/crc32c.h"
#include "obs/tensorboard.h"
#include "train/checkpoint.h"
#include "train/resume.h"
#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {
using namespace cli;

// ---- independent encoders: a bitwise CRC-32C and hand-placed bytes ----

uint32_t bitwise_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string le32(uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}
std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}
std::string bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return le64(u);
}
std::string bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return le32(u);
}

// ---- the reader: TFRecord framing, both CRCs, the Event fields ----

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool session_start = false;
  std::map<std::string, float> scalars;
  bool has_summary = false;
};

struct Cursor {
  const std::string& b;
  size_t pos, end;
  bool done() const { return pos >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; pos < end; shift += 7) {
      const auto byte = static_cast<uint8_t>(b[pos++]);
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return v;
    }
    throw std::runtime_error("varint runs past its message");
  }
  std::string bytes(size_t n) {
    if (pos + n > end) throw std::runtime_error("field runs past its message");
    pos += n;
    return b.substr(pos - n, n);
  }
  Cursor sub() {
    const size_t n = varint();
    if (pos + n > end) throw std::runtime_error("message runs past its parent");
    Cursor c{b, pos, pos + n};
    pos += n;
    return c;
  }
};

Event decode_event(const std::string& data) {
  Event e;
  Cursor c{data, 0, data.size()};
  while (!c.done()) {
    const uint64_t key = c.varint();
    switch (key) {
      case (1 << 3) | 1: std::memcpy(&e.wall_time, c.bytes(8).data(), 8); break;
      case (2 << 3) | 0: e.step = static_cast<int64_t>(c.varint()); break;
      case (3 << 3) | 2: {
        Cursor v = c.sub();
        e.file_version = v.bytes(v.end - v.pos);
        break;
      }
      case (5 << 3) | 2: {
        e.has_summary = true;
        Cursor s = c.sub();
        while (!s.done()) {
          if (s.varint() != ((1 << 3) | 2)) throw std::runtime_error("Summary: a field other than value");
          Cursor v = s.sub();
          std::string tag;
          float value = 0;
          bool has_value = false;
          while (!v.done()) {
            const uint64_t k = v.varint();
            if (k == ((1 << 3) | 2)) {
              Cursor t = v.sub();
              tag = t.bytes(t.end - t.pos);
            } else if (k == ((2 << 3) | 5)) {
              std::memcpy(&value, v.bytes(4).data(), 4);
              has_value = true;
            } else {
              throw std::runtime_error("Summary.Value: unexpected field key " + std::to_string(k));
            }
          }
          if (!has_value || tag.empty()) throw std::runtime_error("Summary.Value without tag or simple_value");
          if (!e.scalars.emplace(tag, value).second) throw std::runtime_error("tag twice in one event: " + tag);
        }
        break;
      }
      case (6 << 3) | 2: {
        Cursor s = c.sub();
        if (s.varint() != ((1 << 3) | 0) || s.varint() != 1 || !s.done())
          throw std::runtime_error("SessionLog other than status START");
        e.session_start = true;
        break;
      }
      default: throw std::runtime_error("Event: unexpected field key " + std::to_string(key));
    }
  }
  return e;
}

// Every record of an events file; a bad CRC, a truncated record or an undecodable event fails
// the test.
std::vector<Event> read_events(const std::string& path, std::vector<int64_t>* ends = nullptr) {
  const std::string f = slurp(path);
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < f.size()) {
    if (f.size() - pos < 12) {
      ADD_FAILURE() << path << ": truncated record header at byte " << pos;
      break;
    }
    const std::string len_bytes = f.substr(pos, 8);
    uint64_t len = 0;
    std::memcpy(&len, len_bytes.data(), 8);
    uint32_t len_crc = 0, data_crc = 0;
    std::memcpy(&len_crc, f.data() + pos + 8, 4);
    EXPECT_EQ(len_crc, masked(bitwise_crc32c(len_bytes))) << path << ": length CRC at byte " << pos;
    if (f.size() - pos - 12 < len + 4) {
      ADD_FAILURE() << path << ": truncated record at byte " << pos;
      break;
    }
    const std::string data = f.substr(pos + 12, len);
    std::memcpy(&data_crc, f.data() + pos + 12 + len, 4);
    EXPECT_EQ(data_crc, masked(bitwise_crc32c(data))) << path << ": data CRC at byte " << pos;
    try {
      out.push_back(decode_event(data));
    } catch (const std::exception& e) {
      ADD_FAILURE() << path << ": record at byte " << pos << ": " << e.what();
    }
    pos += 12 + len + 4;
    if (ends) ends->push_back(static_cast<int64_t>(pos));
  }
  return out;
}

std::vector<std::string> events_files(const std::string& run) {
  std::vector<std::string> out;
  std::error_code ec;  // a run directory not made yet holds none
  for (const auto& e : fs::directory_iterator(run, ec))
    if (e.path().filename().string().find("tfevents") != std::string::npos) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());  // TensorBoard's order
  return out;
}

// What TensorBoard shows of a run directory: its files in name order, each starting with
// file_version; a SessionLog START at step S drops every event read before at step S or later.
std::vector<Event> tensorboard_view(const std::string& run) {
  std::vector<Event> shown;
  for (const auto& path : events_files(run)) {
    const auto events = read_events(path);
    EXPECT_FALSE(events.empty()) << path;
    if (events.empty()) continue;
    EXPECT_EQ(events[0].file_version, "brain.Event:2") << path << ": the first record";
    for (size_t i = 1; i < events.size(); ++i) {
      const Event& e = events[i];
      EXPECT_TRUE(e.file_version.empty()) << path << ": file_version again in record " << i;
      if (e.session_start) {
        std::erase_if(shown, [&](const Event& s) { return s.step >= e.step; });
      } else {
        EXPECT_TRUE(e.has_summary) << path << ": record " << i << " holds neither a summary nor a SessionLog";
        shown.push_back(e);
      }
    }
  }
  return shown;
}

// The scalars a metrics.jsonl record must appear as, derived here from the record alone.
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, float>& out) {
  for (const auto& [k, v] : j.items()) {
    if (v.is_number()) out[prefix + k] = v.get<float>();
    else if (v.is_object()) flatten(v, prefix + k + "/", out);
  }
}

std::map<std::string, float> expected_scalars(const nlohmann::json& rec) {
  static const std::map<std::string, std::string> train_tags = {
      {"loss", "train/loss"}, {"lr", "train/lr"}, {"grad_norm", "train/grad_norm"},
      {"samples_per_s", "train/samples_per_s"}, {"tokens_per_s", "train/tokens_per_s"},
      {"loss_scale", "train/loss_scale"}, {"skipped_steps", "train/skipped_steps"},
      {"gpu_util", "gpu/utilization"}, {"gpu_mem_mb", "gpu/memory_used_mib"}, {"gpu_power_w", "gpu/power_w"}};
  std::map<std::string, float> out;
  const std::string split = rec.at("split");
  if (split == "train") {
    for (const auto& [k, v] : rec.items()) {
      if (k == "split" || k == "step" || k == "epoch" || k == "time_s") continue;
      auto t = train_tags.find(k);
      if (t == train_tags.end()) {
        ADD_FAILURE() << "train records gained '" << k << "': give it a TensorBoard tag";
        continue;
      }
      out[t->second] = v.get<float>();
    }
  } else if (split == "data") {
    out["train/data_wait_share"] = rec.at("data_wait_share").get<float>();
  } else {
    nlohmann::json metrics = rec;
    for (const char* k : {"split", "step", "epoch", "lr", "samples_per_s", "time_s"}) metrics.erase(k);
    flatten(metrics, split + "/", out);
  }
  return out;
}

// The TensorBoard view of `run` holds exactly metrics.jsonl's records, in order, at their steps.
// Returns the number of records of each split.
std::map<std::string, int> expect_view_matches_metrics(const std::string& run) {
  const auto records = read_metrics(run + "/metrics.jsonl");
  const auto shown = tensorboard_view(run);
  std::map<std::string, int> per_split;
  EXPECT_EQ(shown.size(), records.size()) << "one event per metrics.jsonl record";
  if (shown.size() != records.size()) return per_split;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(shown[i].step, records[i].at("step").get<int64_t>()) << "record " << i << ": " << records[i];
    EXPECT_EQ(shown[i].scalars, expected_scalars(records[i])) << "record " << i << ": " << records[i];
    ++per_split[records[i].at("split")];
  }
  EXPECT_GT(per_split["train"], 2);
  EXPECT_GT(per_split["val"], 1);
  return per_split;
}

const std::string kTrain = "train " + example_config() + kSmall;

TEST(TensorBoard, Crc32cOfTheCheckString) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c("6789", crc32c("12345")), 0xE3069283u) << "continues over more bytes";
  const std::string bytes = "seqtrain \x01\x02\xff records";
  EXPECT_EQ(crc32c(bytes), bitwise_crc32c(bytes));
}

// Every TensorFlow events file opens with the same 12 bytes: a 24-byte file_version record's
// length and its masked CRC.
TEST(TensorBoard, FileVersionRecordHasTensorFlowsHeader) {
  const std::string record = tensorboard::frame_record(tensorboard::file_version_event(1.7e9));
  const std::string tf_header("\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7f\x4b\x22", 12);
  EXPECT_EQ(record.substr(0, 12), tf_header);
  EXPECT_EQ(record.substr(12, 9), "\x09" + bits_of(1.7e9));
  EXPECT_EQ(record.substr(21, 15), "\x1a\x0d" "brain.Event:2");
}

TEST(TensorBoard, FramedScalarRecordMatchesHandEncodedBytes) {
  const double wall = 1700000000.25;
  const std::string value = std::string("\x0a\x0a") + "train/loss" + "\x15" + bits_of(0.125f);  // tag, simple_value
  const std::string summary = "\x0a" + std::string(1, static_cast<char>(value.size())) + value;
  const std::string event = "\x09" + bits_of(wall) +         // wall_time = 1, fixed64
                            std::string("\x10\xac\x02") +  // step = 2: 300 as a varint
                            "\x2a" + std::string(1, static_cast<char>(summary.size())) + summary;  // summary = 5
  const std::string length = le64(event.size());
  const std::string framed = length + le32(masked(bitwise_crc32c(length))) + event + le32(masked(bitwise_crc32c(event)));

  const std::string ours = tensorboard::scalars_event(wall, 300, {{"train/loss", 0.125f}});
  EXPECT_EQ(ours, event);
  EXPECT_EQ(tensorboard::frame_record(ours), framed);
  // SessionLog { status: START } at step 7.
  EXPECT_EQ(tensorboard::session_start_event(wall, 7), "\x09" + bits_of(wall) + "\x10\x07" + "\x32\x02\x08\x01");
  const Event back = decode_event(ours);
  EXPECT_EQ(back.step, 300);
  EXPECT_EQ(back.wall_time, wall);
  EXPECT_EQ(back.scalars, (std::map<std::string, float>{{"train/loss", 0.125f}}));
}

// A short run read back record by record: every train, data, val and test record of
// metrics.jsonl is one event at its step with exactly its values; a run without the key
// writes no events file.
TEST(TensorBoard, ReaderFindsEveryRecordOfATrainingRun) {
  TempDir dir;
  const std::string run = dir / "run";
  const double t0 = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Result r = run_seqtrain(kTrain + " --set train.epochs=3 --set runtime.tensorboard=true --quiet --out " + run);
  ASSERT_EQ(r.rc, 0) << r.out;
  const double t1 = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto files = events_files(run);
  ASSERT_EQ(files.size(), 1u);
  const std::string name = fs::path(files[0]).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 9), ".seqtrain") << name;
  for (const Event& e : read_events(files[0])) {
    EXPECT_GE(e.wall_time, std::floor(t0) - 1);
    EXPECT_LE(e.wall_time, t1 + 1);
  }
  auto counts = expect_view_matches_metrics(run);
  EXPECT_EQ(counts["data"], counts["val"]) << "one validation per epoch";
  EXPECT_EQ(counts["test"], 1);
  auto st = nlohmann::json::parse(slurp(run + "/checkpoints/last/state.json"));
  EXPECT_EQ(st["tensorboard"]["file"], name);
  // `last` was written before the test record, the file's last one: it ends where that begins.
  std::vector<int64_t> ends;
  ASSERT_GE(read_events(files[0], &ends).size(), 2u);
  EXPECT_EQ(ends.back(), static_cast<int64_t>(fs::file_size(files[0])));
  EXPECT_EQ(st["tensorboard"]["bytes"].get<int64_t>(), ends[ends.size() - 2]);

  const std::string plain = dir / "plain";
  ASSERT_EQ(run_seqtrain(kTrain + " --set train.epochs=1 --quiet --out " + plain).rc, 0);
  EXPECT_TRUE(events_files(plain).empty()) << "runtime.tensorboard is off by default";
  EXPECT_FALSE(nlohmann::json::parse(slurp(plain + "/checkpoints/last/state.json")).contains("tensorboard"));
}

// kill -9 once records past the first checkpoint reached the events file; --resume cuts that
// file back to the checkpoint's length and starts a second file with file_version, then a
// SessionLog START at the checkpoint's step + 1. What TensorBoard shows is metrics.jsonl.
TEST(TensorBoard, ResumeAfterKillNineCutsTheTailAndStartsANewFile) {
  TempDir dir;
  const std::string run = dir / "run";
  // Validation every 5 updates flushes the file often; checkpoints come once an epoch.
  const std::string args = kTrain + " --set train.epochs=4 --set train.eval_every=5u --set train.early_stopping.patience=0"
                           " --set runtime.tensorboard=true";
  pid_t pid = spawn_seqtrain(args + " --out " + run, dir / "log");
  const std::string last = run + "/checkpoints/last/state.json";
  int64_t ckpt_bytes = -1;
  const bool past = wait_until([&] {
    if (!running(pid)) return true;
    if (ckpt_bytes < 0 && fs::exists(last)) {
      try {
        ckpt_bytes = nlohmann::json::parse(slurp(last)).at("tensorboard").at("bytes").get<int64_t>();
      } catch (const std::exception&) {
      }
    }
    const auto files = events_files(run);
    return ckpt_bytes > 0 && !files.empty() && static_cast<int64_t>(fs::file_size(files[0])) > ckpt_bytes;
  }, 120);
  kill(pid, SIGKILL);
  const int status = wait_status(pid);
  ASSERT_TRUE(past) << "no records past the first checkpoint before the deadline";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the run ended before it could be killed:\n"
                                                                  << slurp(dir / "log");
  // `last` may have moved on meanwhile: the resume continues from the newest checkpoint, found
  // as it finds it (after tidying what the kill left of a checkpoint being published).
  recover_checkpoints(run + "/checkpoints");
  const auto candidates = resume_candidates(run + "/checkpoints");
  ASSERT_FALSE(candidates.empty());
  const nlohmann::json& st = candidates[0].state;
  const std::string first = events_files(run).at(0);
  const int64_t cut = st.at("tensorboard").at("bytes").get<int64_t>();
  const int64_t resume_step = st.at("updates").get<int64_t>();

  Result resumed = run_seqtrain("train --resume " + run + " --quiet");
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  const auto files = events_files(run);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], first);
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(first)), cut) << "cut back to the checkpoint";
  const auto second = read_events(files[1]);
  ASSERT_GE(second.size(), 3u);
  EXPECT_EQ(second[0].file_version, "brain.Event:2");
  EXPECT_TRUE(second[1].session_start);
  EXPECT_EQ(second[1].step, resume_step + 1);
  for (const Event& e : read_events(first)) EXPECT_LE(e.step, resume_step) << "the first file ends at the checkpoint";
  expect_view_matches_metrics(run);
}

// Sets the immutable flag (root) or removes the write bits (anyone else) of a directory, and
// restores it when it dies. ok is false where neither takes effect.
struct Unwritable {
  std::string dir;
  bool root = geteuid() == 0, ok = false;
  explicit Unwritable(const std::string& d) : dir(d) {
    ok = root ? run_command("chattr +i '" + dir + "' 2>/dev/null") == 0 : chmod(dir.c_str(), 0555) == 0;
    if (ok) ok = run_command("touch '" + dir + "/probe' 2>/dev/null") != 0;
  }
  ~Unwritable() {
    if (root) run_command("chattr -i '" + dir + "' 2>/dev/null");
    else chmod(dir.c_str(), 0755);
  }
};

std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().string()] = slurp(e.path().string());
  return out;
}

// A run directory that became read-only: resuming with TensorBoard on fails on the events file
// before training, naming it and the fixes, and leaves every file of the run as it was (the
// metrics log is not cut back, config.yaml not rewritten).
TEST(TensorBoard, UnwritableRunDirectoryIsRefusedBeforeTraining) {
  TempDir dir;
  const std::string run = dir / "run";
  ASSERT_EQ(run_seqtrain(kTrain + " --set train.epochs=1 --quiet --out " + run).rc, 0);
  const auto before = contents(run);
  Result r{0, ""};
  {
    Unwritable guard(run);
    if (!guard.ok) GTEST_SKIP() << "cannot make a directory unwritable here (chattr +i needs root on ext4/xfs)";
    r = run_seqtrain("train --resume " + run + " --set train.epochs=2 --set runtime.tensorboard=true");
  }
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "cannot create the TensorBoard events file '" + run + "/events.out.tfevents.");
  EXPECT_CONTAINS(r.out, "make the run directory '" + run + "' writable");
  EXPECT_CONTAINS(r.out, "runtime.tensorboard=false");
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  EXPECT_EQ(contents(run), before) << "the run's files changed";
  EXPECT_TRUE(events_files(run).empty());
}

}  // namespace
}  // namespace seqtrain::testing
