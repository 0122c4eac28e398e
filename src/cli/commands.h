// The CLI's commands as plain functions over parsed arguments (main.cpp does the parsing).
#pragma once
#include <string>
#include <vector>

namespace seqtrain {

struct TrainArgs {
  std::string config, out, resume;
  std::vector<std::string> overrides;
  bool overwrite = false, quiet = false;
  int threads = -1;
};
struct EvalArgs { std::string checkpoint, input, split = "test"; };
struct PredictArgs { std::string checkpoint, input, output; };
struct DataCacheArgs {
  std::string config;
  std::vector<std::string> overrides;
};
struct DataInfoArgs { std::string dir = "."; };

int run_train(const TrainArgs& args);
int run_eval(const EvalArgs& args);
int run_predict(const PredictArgs& args);
// `seqtrain data cache`: builds (or finds) the pre-augmentation cache of a config's training
// split without training. `seqtrain data info`: lists the caches of a directory.
int run_data_cache(const DataCacheArgs& args);
int run_data_info(const DataInfoArgs& args);

}  // namespace seqtrain
