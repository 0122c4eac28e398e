// StopAt: an observer that asks an in-process training run to stop at a given optimizer update
// or at the end of a given epoch, as a signal would, for the tests that resume a run from where
// it stopped and compare it with the uninterrupted one.
#pragma once
#include <cstdint>
#include <string>

#include "train/observer.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain::testing {

struct StopAt : TrainObserver {
  StopToken* stop = nullptr;
  int64_t update = -1, epoch = -1;  // -1: never
  void on_step(const StepEvent& e) override {
    if (e.updates == update) stop->request();
  }
  void on_epoch(const EpochEvent& e) override {
    if (e.epoch == epoch) stop->request();
  }
};

// Trains `config` quietly into `run` and stops it at optimizer update `update` or at the end of
// epoch `epoch` (-1: never), as a stop request there would; `last` is then where a resume starts.
inline TrainSummary train_stopped_at(const Config& config, const std::string& run, int64_t update, int64_t epoch) {
  StopToken stop;
  StopAt obs;
  obs.stop = &stop;
  obs.update = update;
  obs.epoch = epoch;
  TrainOptions opt(run, false, false, true);
  opt.stop = &stop;
  opt.observers = {&obs};
  return train(config, opt);
}

}  // namespace seqtrain::testing
