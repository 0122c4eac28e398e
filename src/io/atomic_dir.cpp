#include "io/atomic_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"

namespace seqtrain {
namespace fs = std::filesystem;

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  ST_CHECK(fd >= 0, "cannot open '{}' to flush it to disk: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  ST_CHECK(rc == 0, "cannot flush '{}' to disk: {}", path, std::strerror(errno));
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ST_CHECK(f.good(), "cannot write '{}': {} (check the directory exists and is writable)", tmp, std::strerror(errno));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f.good()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      fail("writing '{}' failed (disk full?)", path);
    }
  }
  fsync_path(tmp);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail("cannot move '{}' into place: {}", path, ec.message());
  }
  fsync_path(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string());
}

void publish_dir(const std::string& tmp_dir, const std::string& final_dir) {
  fsync_path(tmp_dir);
  const fs::path parent = fs::path(final_dir).parent_path();
  const std::string old = (parent / (".old-" + fs::path(final_dir).filename().string())).string();
  std::error_code ec;
  fs::remove_all(old, ec);
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old, ec);
    ST_CHECK(!ec, "cannot move the previous '{}' aside: {}", final_dir, ec.message());
  }
  fs::rename(tmp_dir, final_dir, ec);
  ST_CHECK(!ec, "cannot move '{}' into place as '{}': {}", tmp_dir, final_dir, ec.message());
  fsync_path(parent.string());
  fs::remove_all(old, ec);
}

uint64_t file_fnv1a(const std::string& path, const std::string& purpose) {
  std::ifstream f(path, std::ios::binary);
  ST_CHECK(f.good(), "{}: cannot read the file {}", path, purpose);
  uint64_t h = kFnv1aOffset;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a(buf.data(), static_cast<size_t>(f.gcount()), h);
  }
  return h;
}

std::string file_checksum(const std::string& path) {
  return fmt::format("{:016x}", file_fnv1a(path, "to verify its checksum"));
}

}  // namespace seqtrain
