// `seqtrain diagnose CONFIG [--set k=v ...]`: the machine, the data, the model, a measured step
// time and the epoch and run time that follow, and warnings with fixes (obs/diagnose.h). Writes
// nothing. Exit 0, or 1 when it found an error (everything it could measure is still printed).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace seqtrain {

struct DiagnoseArgs {
  std::string config;
  std::vector<std::string> overrides;
  int64_t steps = 10;
};

CLI::App* add_diagnose_command(CLI::App& app, DiagnoseArgs& args);
int run_diagnose(const DiagnoseArgs& args);

}  // namespace seqtrain
