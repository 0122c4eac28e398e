// `seqtrain diagnose`: see diagnose.h.
#include "cli/diagnose.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "obs/diagnose.h"

namespace seqtrain {

CLI::App* add_diagnose_command(CLI::App& app, DiagnoseArgs& a) {
  auto* d = app.add_subcommand("diagnose",
                               "Check a config on this machine before training: machine, data, model memory, a "
                               "measured step time, the epoch and run time, and warnings with fixes (writes nothing)");
  d->add_option("config", a.config, "YAML config file")->required()->check(CLI::ExistingFile);
  d->add_option("--set", a.overrides, "Override a config key: --set train.batch_size=512 (repeatable)");
  d->add_option("--steps", a.steps, "training batches to time (after 2 warm-up ones)")->check(CLI::Range(1, 10000));
  return d;
}

int run_diagnose(const DiagnoseArgs& a) {
  DiagnoseOptions o;
  o.steps = a.steps;
  const Diagnosis d = diagnose(a.config, a.overrides, o);
  std::fputs(format_diagnosis(d).c_str(), stdout);
  return d.has_error() ? 1 : 0;
}

}  // namespace seqtrain
