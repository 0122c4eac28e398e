// Synthetic source: a battery cell cycled between charge, rest and discharge, sampled once a
// row. Columns: voltage [V], current [A] (positive = discharge), temperature [degC], soc [0..1].
// The point is a series with real structure for demos and tests, fully determined by the
// seed: voltage follows an open-circuit-voltage curve of the state of charge, an ohmic drop
// and an RC polarisation that relaxes over ~30 rows, and the current ramps towards each new
// load instead of jumping, so the recent window tells a model far more about the next
// voltage than the last value alone does. docs/DATA.md gives every constant.
// data.synthetic.cells: a fleet of such cells, each its own series (Series::segments), differing
// in capacity, resistance and ambient temperature, which three constant columns carry.
#pragma once
#include "config/config.h"
#include "data/series.h"

namespace seqtrain {

Series make_synthetic(const SyntheticConfig& config);

// The open-circuit voltage curve used above (monotone, 3.2 V empty to 4.2 V full); exposed
// for tests and docs.
double synthetic_ocv(double soc);

}  // namespace seqtrain
