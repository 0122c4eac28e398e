#include "core/system.h"

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace seqtrain {

int64_t system_cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int64_t>(n);
}

int64_t system_available_ram() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream ss(line.substr(13));
      int64_t kb = 0;
      ss >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace seqtrain
