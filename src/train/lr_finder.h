// The LR range test behind `seqtrain find-lr` (Leslie Smith's test, as fastai's lr_find and
// pytorch-lr-finder run it): the run's model built fresh, trained with its own optimizer, clipping,
// loss scaling and batches, while the learning rate grows exponentially from `start` to `end` over
// `steps` optimizer steps. Each step's loss is smoothed (an exponential average, bias-corrected,
// over about a twentieth of the steps: beta = 1 - 20 / steps, at most fastai's 0.98) and the test
// stops early once the smoothed loss passes 4x the best seen: past that point the model diverges
// and later rates say nothing more. Why not fastai's fixed 0.98: an average over 50 of 100 steps
// lags the curve by half the range, 10^4 in lr from 1e-7 to 10, and every reading with it.
//
// The suggestion is read off the smoothed curve, by one of two rules, and says which:
//   steepest descent   the rate where the smoothed loss falls fastest against log(lr), before the
//                      minimum: a rate that still learns quickly but is well short of diverging
//   minimum / 10       a tenth of the rate at the minimum, when the curve has no descent to read
//                      (the minimum within the first few points), kept within [start, end]
// Nothing outside the process changes: the model comes from the config and seed (model.init_from
// and model.encoder_from are read as training reads them), no run directory or data cache is
// written (the caller writes the CSV and plot where it is told).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"

namespace seqtrain {

struct LrFinderOptions {
  double start = 1e-7;   // > 0, < end
  double end = 10.0;
  int64_t steps = 100;   // >= 2 optimizer steps
};
// Error naming the option (--start, --end, --steps) and the fix, before any work.
void check_lr_finder_options(const LrFinderOptions& options);

struct LrPoint {
  int64_t step = 0;
  double lr = 0, loss = 0, smoothed = 0;
};

struct LrFinderResult {
  std::vector<LrPoint> points;  // every step that ran with a finite loss
  std::string stopped;          // why the test ended: "all steps", "diverged: ...", "loss not finite ..."
  size_t min_index = 0;         // the point of the smallest smoothed loss
  double suggestion = 0;
  std::string rule;             // "steepest descent of the smoothed loss" | "a tenth of the lr at the minimum"
  int64_t batch_size = 0;       // the batch it trained with (train.batch_size: auto resolved)
};

// The smoothing and the early stop over a series of losses (find_lr's own arithmetic, exposed so
// a test can drive it with made-up losses). Returns false when the test should stop after `loss`.
class LrCurve {
 public:
  static constexpr double kDivergence = 4.0;
  // Smoothing for a test of `steps` steps (see the top).
  explicit LrCurve(int64_t steps);
  // Adds the step's point; false when the loss is not finite (not added) or the smoothed loss
  // passed kDivergence x the best (added, then stop). *why says which.
  bool add(int64_t step, double lr, double loss, std::string* why);
  const std::vector<LrPoint>& points() const { return points_; }

 private:
  std::vector<LrPoint> points_;
  double beta_ = 0, average_ = 0, best_ = 0;
};

// Fills min_index, suggestion and rule from the points (at least one), within [start, end].
void suggest_lr(LrFinderResult& result, double start, double end);

// Runs the test on `config`'s training data. `note` receives what the training log would say
// (the data, the batch search).
LrFinderResult find_lr(const Config& config, const LrFinderOptions& options,
                       const std::function<void(const std::string&)>& note);

// step,lr,loss,smoothed_loss: one row a point.
std::string lr_finder_csv(const LrFinderResult& result);

}  // namespace seqtrain
