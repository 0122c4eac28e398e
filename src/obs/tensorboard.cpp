// TensorBoard events files: see tensorboard.h.
#include "obs/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"

namespace seqtrain::tensorboard {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "events.out.tfevents.";
constexpr std::string_view kSuffix = ".seqtrain";

// Protobuf wire format: a field's key is (number << 3) | wire type.
enum Wire : uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, Wire wire) { put_varint(out, (field << 3) | wire); }

template <typename T>
void put_little_endian(std::string& out, T v) {  // the host is x86-64: little-endian already
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, length_delimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event's wall_time (1) and step (2), the fields every record of ours starts with.
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, fixed64);
  put_little_endian(e, wall_time);
  if (step != 0) {
    put_key(e, 2, varint);
    put_varint(e, static_cast<uint64_t>(step));  // int64: two's complement as a 64-bit varint
  }
  return e;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The host name as it may stand in a file name: anything but letters, digits, '-', '_' and '.'
// becomes '_'.
std::string file_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host(name);
  for (char& c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return host;
}

// The newest <unix seconds> among events files in `dir` (any writer's), or -1.
int64_t newest_timestamp(const fs::path& dir) {
  int64_t newest = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    const size_t end = name.find('.', kPrefix.size());
    const std::string digits = name.substr(kPrefix.size(), end - kPrefix.size());
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        digits.size() > 18)
      continue;
    newest = std::max<int64_t>(newest, std::stoll(digits));
  }
  return newest;
}

}  // namespace

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view data) {
  std::string r;
  r.reserve(data.size() + 16);
  put_little_endian(r, static_cast<uint64_t>(data.size()));
  put_little_endian(r, masked_crc32c(r));
  r.append(data);
  put_little_endian(r, masked_crc32c(data));
  return r;
}

std::string file_version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string log;
  put_key(log, 1, varint);
  put_varint(log, 1);  // SessionLog.START
  std::string e = event_head(wall_time, step);
  put_bytes(e, 6, log);
  return e;
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_key(value, 2, fixed32);
    put_little_endian(value, s.value);
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

bool is_seqtrain_events_file(const std::string& name) {
  return name.size() > kPrefix.size() + kSuffix.size() && name.compare(0, kPrefix.size(), kPrefix) == 0 &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

EventsFile::EventsFile(const fs::path& dir) {
  const auto now = static_cast<int64_t>(unix_now());
  const int64_t seconds = std::max(now, newest_timestamp(dir) + 1);
  path_ = dir / (std::string(kPrefix) + std::to_string(seconds) + "." + file_host() + "." +
                 std::to_string(::getpid()) + std::string(kSuffix));
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ST_CHECK(fd_ >= 0,
           "cannot create the TensorBoard events file '{}': {}; make the run directory '{}' writable (or choose "
           "another --out), or turn TensorBoard off with --set runtime.tensorboard=false",
           path_.string(), std::strerror(errno), dir.string());
  flushed_at_ = std::chrono::steady_clock::now();
  append(file_version_event(unix_now()));
}

EventsFile::~EventsFile() {
  if (fd_ < 0) return;
  try {
    flush();
  } catch (const Error&) {
  }
  ::close(fd_);
}

void EventsFile::session_start(int64_t step) { append(session_start_event(unix_now(), step)); }

void EventsFile::scalars(int64_t step, const std::vector<Scalar>& values) {
  if (!values.empty()) append(scalars_event(unix_now(), step, values));
}

void EventsFile::append(const std::string& event) {
  const std::string record = frame_record(event);
  buffer_ += record;
  bytes_ += static_cast<int64_t>(record.size());
}

void EventsFile::flush() {
  flushed_at_ = std::chrono::steady_clock::now();
  size_t done = 0;
  while (fd_ >= 0 && done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "nothing written";
      buffer_.erase(0, done);
      fail("cannot write the TensorBoard events file '{}': {}; free space on its file system, or turn TensorBoard "
           "off with --set runtime.tensorboard=false",
           path_.string(), why);
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void EventsFile::close() {
  if (fd_ < 0) return;
  flush();
  const bool synced = ::fsync(fd_) == 0;
  const std::string why = synced ? "" : std::strerror(errno);
  ::close(fd_);
  fd_ = -1;
  ST_CHECK(synced, "cannot sync the TensorBoard events file '{}' to disk: {}", path_.string(), why);
}

double EventsFile::unflushed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - flushed_at_).count();
}

}  // namespace seqtrain::tensorboard
