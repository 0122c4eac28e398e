// `seqtrain --version` and `seqtrain summary CONFIG`: what the binary is, and what a config
// builds, without training. See commands.h.
#include <cstdio>
#include <string>

#include "backend/cpu/isa.h"
#include "backend/cuda_plugin.h"
#include "backend/registry.h"
#include "cli/commands.h"
#include "config/config.h"
#include "core/build_info.h"
#include "models/registry.h"
#include "models/summary.h"
#include "train/data_plan.h"
#include "train/trainer.h"

namespace seqtrain {

int run_version() {
  const BuildInfo& b = build_info();
  std::printf("seqtrain %s\ncommit: %s\nbuild: %s\n", b.version, b.commit, b.build_type);
  std::string levels;
  for (Isa l : {Isa::plain, Isa::avx2, Isa::avx512, Isa::avx512_bf16}) levels += (levels.empty() ? "" : ", ") + std::string(isa_name(l));
  std::printf("cpu kernels built: %s; this CPU runs %s\n", levels.c_str(), isa_summary().c_str());
  const CudaAvailability& cuda = cuda_availability();
  if (cuda.plugin.empty())
    std::printf("cuda plugin: absent (%s)\n", cuda.why_none.c_str());
  else if (cuda.devices > 0)
    std::printf("cuda plugin: %s (%d GPU%s)\n", cuda.plugin.c_str(), cuda.devices, cuda.devices == 1 ? "" : "s");
  else
    std::printf("cuda plugin: %s (no GPU usable: %s)\n", cuda.plugin.c_str(), cuda.why_none.c_str());
  return 0;
}

int run_summary(const SummaryArgs& a) {
  const Config config = load_config(a.config, a.overrides);
  const DataPlan plan = plan_data(config);
  const ModelSpec spec = model_spec(config, plan);
  const std::unique_ptr<Model> model = build_model(spec);
  std::printf("data: %s\nsamples: %ld train / %ld val / %ld test %s\n", plan.source.c_str(), (long)plan.train->size(),
              (long)DataPlan::size_of(plan.val), (long)DataPlan::size_of(plan.test), plan.unit);
  for (const std::string& line : format_summary(spec, model->params())) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace seqtrain
