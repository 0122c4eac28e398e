// What this binary is: seqtrain's version, the git commit it was built from and the build type,
// for `seqtrain --version` and the run's summary.json. Defined by a file the build generates
// (cmake/build_info.cmake), so the commit is the one built, not the one last configured.
#pragma once

namespace seqtrain {

struct BuildInfo {
  const char* version;     // CMake's project VERSION
  const char* commit;      // short hash, "-dirty" with uncommitted changes, or "unknown"
  const char* build_type;  // CMAKE_BUILD_TYPE: Release, Debug, ...
};
const BuildInfo& build_info();

}  // namespace seqtrain
