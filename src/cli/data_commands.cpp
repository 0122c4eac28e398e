// `seqtrain data cache` and `seqtrain data info`: the pre-augmentation cache outside training;
// `seqtrain data export`: a csv or synthetic source as the CSV its run reads.
// `data cache` goes through the same plan_data/training_feed as `seqtrain train`, so the file
// it builds is the one a later training run finds (same key, same contents).
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "data/csv.h"
#include "data/fleet.h"
#include "cli/inputs.h"
#include "config/config.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "data/synthetic_sets.h"
#include "data/synthetic_windows.h"
#include "io/atomic_dir.h"
#include "train/data_plan.h"

namespace seqtrain {
namespace fs = std::filesystem;

int run_data_cache(const DataCacheArgs& a) {
  const Config config = load_config(a.config, a.overrides);
  ST_CHECK(!config.data.cache.empty(),
           "{}: config key 'data.cache' is empty, so there is nothing to build; set data.cache: DIR in the config "
           "or pass --set data.cache=DIR", a.config);
  const DataPlan plan = plan_data(config);
  std::string reason;
  // No training runs beside the build, so every core may fill batches.
  const int64_t workers = loader_workers(config, 1, &reason);
  const TrainFeed feed = training_feed(plan, config, workers);
  std::fprintf(stderr, "seqtrain: %s\n", feed.cache.message.c_str());
  std::printf("cache: %s\nhit: %s\nbytes: %ld\nsource: %s\nepochs: %ld\nsamples: %ld\n", feed.cache.path.c_str(),
              feed.cache.hit ? "true" : "false", (long)feed.cache.bytes, plan.source.c_str(),
              (long)config.data.cache_epochs, (long)feed.source->size());
  return 0;
}

// The columns a csv or synthetic run reads, unnormalized, as the CSV that run would read: the
// synthetic battery series becomes a file `predict --input` and `eval --input` take.
int run_data_export(const DataExportArgs& a) {
  const Config config = load_config(a.config, a.overrides);
  ST_CHECK(windowed(config),
           "{}: data export writes a windowed source (data.source csv or synthetic) as a CSV; this config reads "
           "data.source '{}', whose files ({}) are already what a run reads",
           a.config, config.data.source, is_arrays(config.data) ? "data.npy.*" : "data.path");
  ST_CHECK(ends_with_text(a.out, ".csv"),
           "--out {}: data export writes a CSV; give a path ending in .csv", a.out);
  const Series s = load_series(config.data);
  // A fleet's series column (its ids; long format) and data.time_column first, in its own form, so
  // the export reads back with the same config (and as `--input` of the run).
  const bool timed = !s.times.empty(), fleet = !s.segments.empty();
  std::vector<std::string> head;
  if (fleet) head.push_back(series_column_of(config.data));
  if (timed) head.push_back(config.data.time_column);
  head.insert(head.end(), s.columns.begin(), s.columns.end());
  std::string csv;
  for (size_t c = 0; c < head.size(); ++c) csv += (c ? "," : "") + csv_cell(head[c]);
  csv += "\n";
  for (const SeriesSegment& p : s.parts())
    for (int64_t r = p.begin; r < p.end; ++r) {
      std::string lead = fleet ? csv_cell(p.id) : "";
      if (timed) lead += (fleet ? "," : "") + format_timestamp(s.times[r], s.time_kind);
      csv += lead;
      for (int64_t c = 0; c < s.cols(); ++c) csv += fmt::format("{}{:.9g}", c || !lead.empty() ? "," : "", s.at(r, c));
      csv += "\n";
    }
  write_file_atomic(a.out, csv);  // all of it or nothing
  std::printf("wrote %ld rows x %ld columns (%s) of %s%s to %s\n", (long)s.rows, (long)s.cols(),
              csv.substr(0, csv.find('\n')).c_str(), config.data.source.c_str(),
              fleet ? fmt::format(" ({} series)", s.segments.size()).c_str() : "", a.out.c_str());
  return 0;
}

int run_data_sets(const DataSetsArgs& a) {
  const std::array<int64_t, 3> n = write_set_task(a.out, a.samples, a.seed);
  const SetTaskOptions o;
  std::printf("wrote %ld/%ld/%ld sets (train/val/test) of %ld-%ld elements x %ld features, 4 classes, to %s\n",
              (long)n[0], (long)n[1], (long)n[2], (long)o.min_size, (long)o.max_size, (long)o.features, a.out.c_str());
  return 0;
}

int run_data_windows(const DataWindowsArgs& a) {
  // As data sets: made in memory, published whole.
  const std::string tmp = a.out + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  ST_CHECK(!ec, "--out {}: cannot create {}: {} (choose a writable directory)", a.out, tmp, ec.message());
  struct Part { const char* name; int64_t n; bool labels; };
  const Part parts[4] = {{"unlabelled", a.unlabelled, false},
                         {"train", a.labelled, true},
                         {"val", std::max<int64_t>(1, a.labelled / 2), true},
                         {"test", std::max<int64_t>(1, 2 * a.labelled), true}};
  WindowTaskOptions o;
  o.seed = a.seed;
  for (uint64_t k = 0; k < 4; ++k) {
    const Part& p = parts[k];
    o.samples = p.n;
    o.split = k;
    const WindowSplit s = make_window_split(o);
    const std::string stem = (fs::path(tmp) / p.name).string();
    write_file_atomic(stem + "_x.npy", npy_bytes_f32({p.n, o.steps, 4}, s.x.data(), stem + "_x.npy"));
    if (p.labels) write_file_atomic(stem + "_y.npy", npy_bytes_i64({p.n}, s.labels.data(), stem + "_y.npy"));
  }
  publish_dir(tmp, a.out);
  std::printf("wrote %ld unlabelled and %ld/%ld/%ld labelled (train/val/test) windows of %ld bars x 4 (open, high, "
              "low, close), 2 classes, to %s\n", (long)parts[0].n, (long)parts[1].n, (long)parts[2].n,
              (long)parts[3].n, (long)o.steps, a.out.c_str());
  return 0;
}

int run_data_info(const DataInfoArgs& a) {
  ST_CHECK(fs::is_directory(a.dir), "data info: '{}' is not a directory; pass the directory data.cache names", a.dir);
  const auto entries = list_caches(a.dir);
  if (entries.empty()) {
    std::printf("no data caches in %s\n", a.dir.c_str());
    return 0;
  }
  std::printf("%-16s  %6s  %9s  %10s  %-19s  %s\n", "KEY", "EPOCHS", "SAMPLES", "SIZE", "CREATED (UTC)", "SOURCE");
  for (const CacheEntry& e : entries) {
    std::string source = "?";
    std::ifstream meta(e.path + ".json");
    if (meta) {
      try {
        source = nlohmann::json::parse(meta).value("source", std::string("?"));
      } catch (const nlohmann::json::exception&) {
        source = "? (unreadable " + e.path + ".json)";
      }
    }
    char created[32] = "?";
    struct stat sb{};
    if (::stat(e.path.c_str(), &sb) == 0) {
      std::tm tm{};
      gmtime_r(&sb.st_mtime, &tm);
      std::strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", &tm);
    }
    const std::string size = fmt::format("{:.1f} MiB", static_cast<double>(e.bytes) / (1 << 20));
    if (e.complete)
      std::printf("%016lx  %6ld  %9ld  %10s  %-19s  %s\n", (unsigned long)e.key, (long)e.epochs, (long)e.n,
                  size.c_str(), created, source.c_str());
    else
      std::printf("%-16s  %6s  %9s  %10s  %-19s  %s (incomplete: rebuilt on next use)\n",
                  fs::path(e.path).stem().c_str(), "-", "-", size.c_str(), created, source.c_str());
  }
  return 0;
}

}  // namespace seqtrain
