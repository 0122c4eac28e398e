// The two observers every run has: MetricsObserver writes metrics.jsonl (one record a step
// log, epoch, evaluation; the fields docs/METRICS.md lists), ConsoleObserver the progress
// lines on stderr. ObserverList fans one event out to many.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "train/metrics.h"
#include "train/observer.h"

namespace seqtrain {

class MetricsObserver final : public TrainObserver {
 public:
  explicit MetricsObserver(const std::string& path) : log_(path) {}
  void on_step(const StepEvent& e) override;
  void on_epoch(const EpochEvent& e) override;
  void on_eval(const EvalEvent& e) override;
  int64_t bytes() const { return log_.bytes(); }  // where a checkpoint's resume cuts the log

 private:
  MetricsLog log_;
};

class ConsoleObserver final : public TrainObserver {
 public:
  explicit ConsoleObserver(bool quiet);
  void on_note(const std::string& text) override;
  void on_warning(const std::string& text) override;
  void on_step(const StepEvent& e) override;
  void on_epoch(const EpochEvent& e) override;
  void on_eval(const EvalEvent& e) override;
  void on_end(const EndEvent& e) override;

 private:
  bool quiet_;
  bool tty_;  // progress lines rewrite themselves with \r on a terminal
};

// Forwards every event to each observer in the order added (not owned).
class ObserverList final : public TrainObserver {
 public:
  void add(TrainObserver* o) { if (o) list_.push_back(o); }
  void on_note(const std::string& t) override { for (auto* o : list_) o->on_note(t); }
  void on_warning(const std::string& t) override { for (auto* o : list_) o->on_warning(t); }
  void on_step(const StepEvent& e) override { for (auto* o : list_) o->on_step(e); }
  void on_epoch(const EpochEvent& e) override { for (auto* o : list_) o->on_epoch(e); }
  void on_eval(const EvalEvent& e) override { for (auto* o : list_) o->on_eval(e); }
  void on_checkpoint(const CheckpointEvent& e) override { for (auto* o : list_) o->on_checkpoint(e); }
  void on_end(const EndEvent& e) override { for (auto* o : list_) o->on_end(e); }

 private:
  std::vector<TrainObserver*> list_;
};

}  // namespace seqtrain
