// `seqtrain report RUN [RUN...] --out report.html`: one self-contained HTML page comparing runs
// (obs/report.h). Nothing is written unless every run reads; a path that is not a run directory
// is an error naming it (exit 2).
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace seqtrain {

struct ReportArgs {
  std::vector<std::string> runs;
  std::string out = "report.html";
};

CLI::App* add_report_command(CLI::App& app, ReportArgs& args);
int run_report(const ReportArgs& args);

}  // namespace seqtrain
