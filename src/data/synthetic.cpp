#include "data/synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace seqtrain {
namespace {

// Cell model constants, in units of one row of time. A 1 A discharge from 90% to 20% takes
// about 210 rows, so one full cycle spans roughly 400-700 rows and the default 20000 rows
// hold about forty cycles.
constexpr double kCapacity = 300.0;  // ampere-rows
constexpr double kR0 = 0.04;         // ohmic resistance [ohm] at 25 degC
constexpr double kR1 = 0.03;         // polarisation resistance [ohm]
constexpr double kTau = 30.0;        // polarisation time constant [rows]
constexpr double kHeat = 0.08;       // degC per row per A^2: Joule heating
constexpr double kCool = 0.02;       // per row: relaxation towards ambient (lag ~50 rows)
// The current follows its set point through a first-order lag of this many rows, as a real
// load or charger ramps. Without it every load change would be an unpredictable step in
// voltage, and those steps would dominate any forecaster's error.
constexpr double kLoadLag = 8.0;

enum class Phase { charge, rest_after_charge, discharge, rest_after_discharge };

}  // namespace

double synthetic_ocv(double soc) {
  soc = std::clamp(soc, 0.0, 1.0);
  // Steep knee near empty, flat middle, gentle rise near full: the usual Li-ion shape.
  return 3.2 + 0.7 * soc + 0.2 * (1.0 - std::exp(-10.0 * soc)) + 0.1 * std::pow(soc, 8);
}

namespace {

// What makes one cell of a fleet differ from the next (the single cell has the defaults).
struct CellTraits {
  double capacity = kCapacity;  // ampere-rows
  double r0 = kR0;              // ohmic resistance at 25 degC
  double ambient = 25.0;        // mean ambient temperature [degC]
};

// One cell's `rows` rows into out (row-major, `cols` floats a row; voltage, current,
// temperature, soc first), its draws from `rng`.
void simulate_cell(const SyntheticConfig& cfg, const CellTraits& cell, Rng& rng, float* out, int64_t cols) {
  const double noise = cfg.noise;
  double soc = rng.uniform(0.3f, 0.7f);
  double v_rc = 0.0;        // polarisation voltage
  double temp = cell.ambient;  // cell temperature
  double ambient_walk = 0.0;
  Phase phase = Phase::discharge;
  double current = 0.0;
  double set_point = 0.0;   // where the current is heading
  int64_t rows_left = 0;    // rows until the next load change (discharge) or end of rest
  double soc_goal = rng.uniform(0.1f, 0.25f);

  for (int64_t t = 0; t < cfg.rows; ++t) {
    // Phase machine: charge to a random upper bound at constant current, rest, discharge
    // through piecewise-constant loads to a random lower bound, rest, repeat.
    switch (phase) {
      case Phase::charge:
        if (soc >= soc_goal) {
          phase = Phase::rest_after_charge;
          set_point = 0.0;
          rows_left = 20 + static_cast<int64_t>(rng.below(41));
        }
        break;
      case Phase::rest_after_charge:
        if (--rows_left <= 0) {
          phase = Phase::discharge;
          soc_goal = rng.uniform(0.1f, 0.25f);
          rows_left = 0;
        }
        break;
      case Phase::discharge:
        if (soc <= soc_goal) {
          phase = Phase::rest_after_discharge;
          set_point = 0.0;
          rows_left = 20 + static_cast<int64_t>(rng.below(41));
        } else if (--rows_left <= 0) {
          set_point = rng.uniform(0.5f, 2.0f);
          rows_left = 40 + static_cast<int64_t>(rng.below(81));
        }
        break;
      case Phase::rest_after_discharge:
        if (--rows_left <= 0) {
          phase = Phase::charge;
          soc_goal = rng.uniform(0.85f, 0.95f);
          set_point = -rng.uniform(0.8f, 1.5f);
        }
        break;
    }
    current += (set_point - current) / kLoadLag;
    // Snap a decayed current to exactly zero so a resting cell really rests.
    if (set_point == 0.0 && std::abs(current) < 0.01) current = 0.0;

    // Cell dynamics, explicit Euler with a one-row step.
    soc = std::clamp(soc - current / cell.capacity, 0.0, 1.0);
    v_rc += (current * kR1 - v_rc) / kTau;
    // Ambient: a slow day-like swing plus a bounded random walk.
    ambient_walk = std::clamp(ambient_walk + 0.01 * rng.normal(), -2.0, 2.0);
    double ambient = cell.ambient + 3.0 * std::sin(2.0 * M_PI * static_cast<double>(t) / 5000.0) + ambient_walk;
    temp += kHeat * current * current - kCool * (temp - ambient);
    // Resistance rises as the cell cools, about 1% per degree.
    double r0 = cell.r0 * (1.0 + 0.01 * (25.0 - temp));
    double voltage = synthetic_ocv(soc) - current * r0 - v_rc;

    float* row = out + t * cols;
    row[0] = static_cast<float>(voltage + noise * 0.001 * rng.normal());
    row[1] = static_cast<float>(current + noise * 0.005 * rng.normal());
    row[2] = static_cast<float>(temp + noise * 0.05 * rng.normal());
    row[3] = static_cast<float>(soc);
  }
}

}  // namespace

Series make_synthetic(const SyntheticConfig& cfg) {
  ST_CHECK(cfg.rows >= 1, "data.synthetic.rows must be >= 1, got {}", cfg.rows);
  ST_CHECK(cfg.cells >= 0, "data.synthetic.cells must be >= 0, got {}", cfg.cells);
  Series s;
  s.columns = {"voltage", "current", "temperature", "soc"};
  if (cfg.cells == 0) {
    Rng rng(cfg.seed, /*stream=*/0x5eed);
    s.rows = cfg.rows;
    s.values.resize(static_cast<size_t>(cfg.rows) * 4);
    simulate_cell(cfg, CellTraits{}, rng, s.values.data(), 4);
    return s;
  }
  // A fleet: each cell's traits and draws come from (seed, cell) alone, so cell k is the same in
  // a fleet of 8 and of 64, and the cells can be simulated on several threads at once.
  s.columns.insert(s.columns.end(), {"capacity", "resistance", "ambient"});
  const int64_t cols = 7;
  s.rows = cfg.rows * cfg.cells;
  s.values.resize(static_cast<size_t>(s.rows * cols));
  const size_t width = std::max<size_t>(3, std::to_string(cfg.cells - 1).size());
  for (int64_t k = 0; k < cfg.cells; ++k) {
    std::string id = std::to_string(k);
    s.segments.push_back({"cell_" + std::string(width - id.size(), '0') + id, k * cfg.rows, (k + 1) * cfg.rows});
  }
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t k; (k = next++) < cfg.cells;) {
      Rng traits(mix_seed(cfg.seed, static_cast<uint64_t>(k)), /*stream=*/0xce11);
      CellTraits cell;
      cell.capacity = kCapacity * traits.uniform(0.8f, 1.2f);
      cell.r0 = kR0 * traits.uniform(0.75f, 1.5f);
      cell.ambient = traits.uniform(15.f, 35.f);
      Rng rng(mix_seed(cfg.seed, static_cast<uint64_t>(k)), /*stream=*/0x5eed);
      float* out = s.values.data() + k * cfg.rows * cols;
      simulate_cell(cfg, cell, rng, out, cols);
      for (int64_t t = 0; t < cfg.rows; ++t) {
        out[t * cols + 4] = static_cast<float>(cell.capacity);
        out[t * cols + 5] = static_cast<float>(cell.r0);
        out[t * cols + 6] = static_cast<float>(cell.ambient);
      }
    }
  };
  std::vector<std::thread> threads;
  const int64_t n = std::min<int64_t>(cfg.cells, std::max(1u, std::thread::hardware_concurrency()));
  for (int64_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return s;
}

}  // namespace seqtrain
