// MetricsLog: metrics.jsonl in the run directory, one JSON object a line, flushed per record
// so a crash loses at most the record being written. It counts the bytes the file holds so a
// checkpoint can remember where the log stood; on resume, truncate_metrics() cuts off the
// records written after that checkpoint, which the resumed run writes again.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace seqtrain {

class MetricsLog {
 public:
  MetricsLog() = default;
  explicit MetricsLog(const std::string& path);  // appends
  void write(const nlohmann::json& record);
  int64_t bytes() const { return bytes_; }  // the file's length after the last record

 private:
  std::ofstream out_;
  int64_t bytes_ = 0;
};

// Shortens the file at `path` to `bytes` when it is longer; a missing or shorter file is left
// as it is (records lost to a power cut are not invented).
void truncate_metrics(const std::string& path, int64_t bytes);

}  // namespace seqtrain
