#include "train/metrics.h"

#include <filesystem>

#include "core/error.h"

namespace seqtrain {
namespace fs = std::filesystem;

MetricsLog::MetricsLog(const std::string& path) : out_(path, std::ios::app) {
  ST_CHECK(out_.good(), "cannot open '{}' for writing metrics", path);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  bytes_ = ec ? 0 : static_cast<int64_t>(size);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  const std::string line = record.dump() + '\n';
  out_ << line;
  out_.flush();
  bytes_ += static_cast<int64_t>(line.size());
}

void truncate_metrics(const std::string& path, int64_t bytes) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || bytes < 0 || static_cast<int64_t>(size) <= bytes) return;
  fs::resize_file(path, static_cast<uintmax_t>(bytes), ec);
  ST_CHECK(!ec, "cannot cut '{}' back to {} bytes for the resumed run: {}", path, bytes, ec.message());
}

}  // namespace seqtrain
