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
  int64_t profile = -1;  // --profile[=STEPS]: runtime.profile
};
// input: a CSV (csv/synthetic runs), or an X .npy with `labels` its y .npy (npy runs).
struct EvalArgs { std::string checkpoint, input, labels, lengths, split = "test"; };
struct PredictArgs {
  std::string checkpoint, input, output, lengths;
  std::string plot, series;        // --plot FILE.svg: each shown series' last forecast; --series picks one
  std::vector<std::string> units;  // --unit TARGET=UNIT for the plot's axes
};
struct ForecastArgs { std::string checkpoint, input, future, output; };
struct DataCacheArgs {
  std::string config;
  std::vector<std::string> overrides;
};
struct DataInfoArgs { std::string dir = "."; };
struct DataSetsArgs {
  std::string out;
  int64_t samples = 2000;
  uint64_t seed = 0;
};
struct DataWindowsArgs {
  std::string out;
  int64_t unlabelled = 10000, labelled = 500;
  uint64_t seed = 0;
};
struct DataExportArgs {
  std::string config, out;
  std::vector<std::string> overrides;
};
struct SummaryArgs {
  std::string config;
  std::vector<std::string> overrides;
};

int run_train(const TrainArgs& args);
int run_eval(const EvalArgs& args);
int run_predict(const PredictArgs& args);
// `seqtrain forecast`: the horizon after a CSV history's last row (cli/forecast.cpp).
int run_forecast(const ForecastArgs& args);
// `seqtrain data cache`: builds (or finds) the pre-augmentation cache of a config's training
// split without training. `seqtrain data info`: lists the caches of a directory.
int run_data_cache(const DataCacheArgs& args);
int run_data_info(const DataInfoArgs& args);
// `seqtrain data sets`: the synthetic set task (data/synthetic_sets.h) as npy train/val/test X, y
// and lengths in a directory, for examples/set_encoder.yaml.
int run_data_sets(const DataSetsArgs& args);
// `seqtrain data windows`: synthetic price windows for masked pretraining and fine-tuning
// (data/synthetic_windows.h).
int run_data_windows(const DataWindowsArgs& args);
// `seqtrain data export`: a csv or synthetic source as the CSV its run would read.
int run_data_export(const DataExportArgs& args);
// `seqtrain --version`: version, commit, build type, CPU kernel levels, the CUDA plugin.
int run_version();
// `seqtrain summary CONFIG`: the data and the model table (layers, output shapes, parameters).
int run_summary(const SummaryArgs& args);

}  // namespace seqtrain
