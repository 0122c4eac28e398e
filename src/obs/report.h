// Report: `seqtrain report RUN [RUN...] --out report.html`, one page that compares runs: loss
// and validation-metric curves, learning rate, throughput and data wait (the runs overlaid, a
// colour each), each run's final metrics (summary.json) and the config keys that differ.
// Why one self-contained HTML file with SVG drawn here: it is what a run's author can attach to
// an issue, keep beside the runs or open on a machine without network, and what a test can load
// in a headless browser and check by element; no notebook, plotting package or server needed.
// docs/OBSERVABILITY.md describes the page.
#pragma once
#include <string>
#include <vector>

#include "obs/run_history.h"

namespace seqtrain {

// The page for `runs` (named: name_runs), as one HTML document with inline CSS and SVG.
std::string report_html(const std::vector<RunHistory>& runs);

// Reads every run directory, then writes the page to `out` atomically. Any run that is not a run
// directory, an `out` whose directory does not exist or an `out` that is a directory is an Error
// naming the path, raised before anything is written.
void write_report(const std::vector<std::string>& run_dirs, const std::string& out);

}  // namespace seqtrain
