// `seqtrain report`: see report.h.
#include "cli/report.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "obs/report.h"

namespace seqtrain {

CLI::App* add_report_command(CLI::App& app, ReportArgs& a) {
  auto* r = app.add_subcommand("report",
                               "Write one self-contained HTML page comparing runs: loss, metric, lr, throughput and "
                               "data-wait curves, final metrics and the config keys that differ");
  r->add_option("runs", a.runs, "run directories (the --out of `seqtrain train`)")->required();
  r->add_option("--out", a.out, "the HTML file to write (default report.html; written whole or not at all)");
  return r;
}

int run_report(const ReportArgs& a) {
  write_report(a.runs, a.out);
  std::printf("report: %s (%zu run%s)\n", a.out.c_str(), a.runs.size(), a.runs.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace seqtrain
