// The seasonal naive forecast's geometry, shared by the model's residual baseline
// (models/residual_baseline.h) and the scorer of forecasts (train/forecast_scorer.h), which must
// agree to the index: the step within a window of x ([lookback] steps) that the seasonal naive
// with period m repeats for forecast step h (0 = the first step after the window) is the same
// phase one or more whole periods back. m = 1 is the last value.
#pragma once
#include <cstdint>

namespace seqtrain {

inline int64_t seasonal_source_step(int64_t lookback, int64_t m, int64_t h) { return lookback - m + h % m; }

}  // namespace seqtrain
