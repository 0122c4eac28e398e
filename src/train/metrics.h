// MetricsLog: metrics.jsonl in the run directory, one JSON object a line, flushed per record
// so a crash loses at most the record being written.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace seqtrain {

class MetricsLog {
 public:
  MetricsLog() = default;
  explicit MetricsLog(const std::string& path);  // appends
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
};

}  // namespace seqtrain
