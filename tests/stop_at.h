// StopAt: an observer that asks an in-process training run to stop at a given optimizer update
// or at the end of a given epoch, as a signal would, for the tests that resume a run from where
// it stopped and compare it with the uninterrupted one.
#pragma once
#include <cstdint>

#include "train/observer.h"
#include "train/stop_token.h"

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

}  // namespace seqtrain::testing
