// A benchmark's command line, read with CLI11 as the seqtrain command reads its own: each
// benchmark names its flags and their checks, --help lists them, and an unknown flag or a bad
// value exits 2 with CLI11's message naming it (a bench script stops there rather than timing
// the wrong thing).
#pragma once
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace seqtrain::bench {

inline void parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
}

}  // namespace seqtrain::bench
