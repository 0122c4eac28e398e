// TensorBoard's events file, written by hand. No Debian package writes one from C++ (the
// format lives in TensorFlow's sources; PyTorch writes it from Python), and scalars need very
// little of it: TFRecord framing around a few fields of the Event protobuf message.
//
// Each record (TFRecord): uint64 length, masked CRC-32C of those 8 bytes, the data, masked
// CRC-32C of the data, little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The
// fields written (TensorFlow's event.proto and summary.proto, proto3 wire format):
//   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
//                Summary summary = 5; SessionLog session_log = 6; }
//   Summary    { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   START = 1
// A file starts with file_version "brain.Event:2": from version 2 on, TensorBoard takes a
// SessionLog START at step S as a restart and drops every point it has read at step S or later,
// which is how a resumed run replaces what its interrupted predecessor logged past the
// checkpoint (train/tensorboard_observer.h decides S).
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace seqtrain::tensorboard {

struct Scalar {
  std::string tag;
  float value = 0;  // simple_value is a float: TensorBoard stores every scalar in 32 bits
};

// The encoders are pure functions of their arguments, so tests can compare their bytes with
// bytes built independently. A step of 0 is left out, as proto3 writes a field at its default.
std::string file_version_event(double wall_time);
std::string session_start_event(double wall_time, int64_t step);
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);
uint32_t masked_crc32c(std::string_view bytes);
std::string frame_record(std::string_view data);

// events.out.tfevents.<unix seconds>.<host>.<pid>.seqtrain: TensorBoard picks up any name with
// "tfevents" in it; the suffix tells seqtrain's own files from other writers' in a directory.
bool is_seqtrain_events_file(const std::string& name);

// One events file, open for appending records. Records are buffered and handed to the OS by
// flush(); a crash loses at most those since the last flush. close() flushes and fsyncs.
// Errors (creating, writing) throw seqtrain::Error naming the file and a fix.
class EventsFile {
 public:
  // Creates a new file in `dir` and writes its file_version record. Its timestamp is now, or
  // one second past the newest events file already in `dir` when that one is not older:
  // TensorBoard reads a directory's files in name order, so a file started within the same
  // second as its predecessor (a quick resume) must still sort after it.
  explicit EventsFile(const std::filesystem::path& dir);
  ~EventsFile();  // flushes and closes; errors are dropped here (close() reports them)
  EventsFile(const EventsFile&) = delete;
  EventsFile& operator=(const EventsFile&) = delete;

  void session_start(int64_t step);
  void scalars(int64_t step, const std::vector<Scalar>& values);
  void flush();
  void close();

  const std::filesystem::path& path() const { return path_; }
  int64_t bytes() const { return bytes_; }  // every record written so far, buffered ones too
  // Seconds since the last flush (or since opening): the caller's cue for a timed flush.
  double unflushed_s() const;

 private:
  void append(const std::string& event);

  std::filesystem::path path_;
  int fd_ = -1;
  std::string buffer_;
  int64_t bytes_ = 0;
  std::chrono::steady_clock::time_point flushed_at_;
};

}  // namespace seqtrain::tensorboard
