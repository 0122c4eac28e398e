#include "train/metrics.h"

#include "core/error.h"

namespace seqtrain {

MetricsLog::MetricsLog(const std::string& path) : out_(path, std::ios::app) {
  ST_CHECK(out_.good(), "cannot open '{}' for writing metrics", path);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace seqtrain
