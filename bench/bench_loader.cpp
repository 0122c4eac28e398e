// bench_loader: the input pipeline measured against the training step it feeds (issue 4's goals).
//
//   bench_loader --mode w1 [--threads N] [--batches B] [--json OUT]
//     W1's data shape (batch 256, lookback 150, 8 features, horizon 1) cut from an in-memory
//     series, with every augmentation on (jitter, scale, warp, shift, mask). Reports
//       fill_ms      one batch filled on one thread (what a worker spends per batch),
//       loader_ms    batches per second of the prefetching loader (1 worker) drained by a
//                    consumer that does nothing, as ms per batch,
//       step_ms      one W1 training step (forecaster LSTM 128 x 2, MSE, clip, AdamW) on
//                    `threads` compute threads,
//     and step_ms / fill_ms: how many times faster one worker fills batches than the step
//     consumes them (the goal is 50x).
//
//   bench_loader --mode npy --x X.npy [--y Y.npy] [--batch 256] [--workers 1] [--json OUT]
//     One shuffled epoch over memory-mapped .npy files through the loader. Reports the
//     process's resident memory before opening the files, its peak during the epoch, and the
//     files' size, so "resident memory above the model's needs" can be read off directly.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_model.h"
#include "backend/cpu/dnnl_context.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "data/augment.h"
#include "data/loader.h"
#include "data/npy.h"
#include "data/window_dataset.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

using namespace seqtrain;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode = "w1", x, y, json_out;
  int threads = 0, batches = 20, batch = 256, workers = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_loader: the loader's throughput (w1: the W1 windows; npy: X.npy [Y.npy])"};
  app.add_option("--mode", a.mode)->check(CLI::IsMember({"w1", "npy"}));
  app.add_option("--x", a.x, "X.npy (--mode npy)");
  app.add_option("--y", a.y, "Y.npy (--mode npy)");
  app.add_option("--json", a.json_out);
  app.add_option("--threads", a.threads, "0: the machine's cores")->check(CLI::NonNegativeNumber);
  app.add_option("--batches", a.batches)->check(CLI::PositiveNumber);
  app.add_option("--batch", a.batch)->check(CLI::PositiveNumber);
  app.add_option("--workers", a.workers)->check(CLI::NonNegativeNumber);
  bench::parse_flags(app, argc, argv);
  if (a.mode == "npy" && a.x.empty()) {
    std::cerr << "bench_loader: --mode npy needs --x X.npy\n";
    std::exit(2);
  }
  return a;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Resident set now (VmRSS) and its peak so far (VmHWM), in MB, from /proc/self/status.
double status_mb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return 0;
}

json bench_w1(const Args& a) {
  constexpr int64_t B = 256, L = 150, F = 8, rows = 40000;
  set_cpu_threads(a.threads);
  auto table = std::make_shared<Series>();
  for (int64_t f = 0; f < F; ++f) table->columns.push_back("f" + std::to_string(f));
  table->rows = rows;
  table->values.resize(rows * F);
  Rng rng(7);
  for (float& v : table->values) v = rng.normal();
  WindowDataset windows(table, {0, rows}, {0, 1, 2, 3, 4, 5, 6, 7}, {7}, L, 1, 1);
  WindowSource plain(windows);
  AugmentOptions aug{.seed = 1, .jitter_sigma = 0.03f, .scale_sigma = 0.1f, .warp_sigma = 0.2f,
                     .warp_knots = 4, .shift_max = 5, .mask_prob = 0.02f, .mask_width = 4};
  AugmentedSource source(plain, aug, L, F);

  // One worker's cost: fill `batches` shuffled batches on this thread.
  std::vector<float> x(B * L * F), y(B);
  const std::vector<int64_t> order = epoch_order(windows.size(), true, 3, 0);
  auto t0 = Clock::now();
  for (int i = 0; i < a.batches; ++i)
    source.fill(std::span<const int64_t>(order.data() + i * B, B), 0, x.data(), y.data());
  const double fill_ms = ms_since(t0) / a.batches;
  // The same batches with no augmentation and with one transform at a time: where fill time goes.
  json by_transform;
  const auto time_fill = [&](const BatchSource& src) {
    auto t = Clock::now();
    for (int i = 0; i < a.batches; ++i)
      src.fill(std::span<const int64_t>(order.data() + i * B, B), 0, x.data(), y.data());
    return ms_since(t) / a.batches;
  };
  by_transform["none"] = time_fill(plain);
  const std::pair<const char*, AugmentOptions> single[] = {
      {"jitter", {.seed = 1, .jitter_sigma = 0.03f}}, {"scale", {.seed = 1, .scale_sigma = 0.1f}},
      {"warp", {.seed = 1, .warp_sigma = 0.2f}},     {"shift", {.seed = 1, .shift_max = 5}},
      {"mask", {.seed = 1, .mask_prob = 0.02f, .mask_width = 4}}};
  for (const auto& [name, o] : single) by_transform[name] = time_fill(AugmentedSource(plain, o, L, F));

  // The loader's delivery rate with one worker and an idle consumer.
  double loader_ms = 0;
  {
    Loader loader(source, LoaderOptions{.workers = 1, .prefetch = 4, .batch_size = B, .shuffle = true, .seed = 3});
    loader.start_epoch(0);
    auto t1 = Clock::now();
    int n = 0;
    while (n < a.batches) {
      const Batch* b = loader.next();
      if (!b) break;
      loader.release(b);
      ++n;
    }
    loader_ms = ms_since(t1) / std::max(n, 1);
  }

  // The step those batches feed.
  ModelSpec spec;
  spec.type = "lstm";
  spec.input_size = F;
  spec.lookback = L;
  spec.hidden = 128;
  spec.layers = 2;
  spec.output_size = 1;
  bench::BenchModel bm(spec);
  TrainStep& step = *bm.step;
  source.fill(std::span<const int64_t>(order.data(), B), 0, x.data(), y.data());
  Tensor xt(x.data(), {B, L, F}), yt(y.data(), {B, 1});
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    auto t2 = Clock::now();
    step.run(xt, yt, static_cast<uint64_t>(i));
    if (i >= 2) ms.push_back(ms_since(t2));
  }
  std::sort(ms.begin(), ms.end());
  const double step_ms = ms[ms.size() / 2];
  return {{"mode", "w1"}, {"batch", B}, {"lookback", L}, {"features", F}, {"augmentation", "all five on"},
          {"fill_ms", fill_ms}, {"fill_ms_by_transform", by_transform}, {"loader_ms", loader_ms}, {"step_ms", step_ms},
          {"step_over_fill", step_ms / fill_ms}, {"threads", a.threads}};
}

json bench_npy(const Args& a) {
  const double rss_before = status_mb("VmRSS");
  NpySource source = NpySource::open(a.x, a.y);
  const double file_mb = (std::filesystem::file_size(a.x) + (a.y.empty() ? 0 : std::filesystem::file_size(a.y))) / 1048576.0;
  Loader loader(source, LoaderOptions{.workers = a.workers, .prefetch = 2, .batch_size = a.batch,
                                      .shuffle = true, .seed = 5});
  loader.start_epoch(0);
  double checksum = 0;
  int64_t batches = 0;
  auto t0 = Clock::now();
  while (const Batch* b = loader.next()) {
    checksum += b->x[0];
    loader.release(b);
    ++batches;
  }
  const double epoch_s = ms_since(t0) / 1000;
  return {{"mode", "npy"}, {"x", a.x}, {"y", a.y}, {"samples", source.size()}, {"batches", batches},
          {"workers", a.workers}, {"file_mb", file_mb}, {"rss_before_mb", rss_before},
          {"rss_peak_mb", status_mb("VmHWM")}, {"rss_end_mb", status_mb("VmRSS")},
          {"rss_peak_above_start_mb", status_mb("VmHWM") - rss_before}, {"epoch_s", epoch_s},
          {"checksum", checksum}};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    const json r = a.mode == "w1" ? bench_w1(a) : bench_npy(a);
    std::cout << r.dump() << "\n";
    if (!a.json_out.empty()) std::ofstream(a.json_out) << r.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "bench_loader: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
