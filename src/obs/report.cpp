// The report page: see report.h.
#include "obs/report.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "core/build_info.h"
#include "core/error.h"
#include "io/atomic_dir.h"
#include "obs/svg_plot.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

// d3's category10: distinct at a glance, and what most plotting tools have taught readers.
const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string color_of(size_t run) { return kPalette[run % std::size(kPalette)]; }

// Fields of a validation record that are not a metric of the model (or that the loss chart and
// the other charts already show).
const std::set<std::string> kNotMetrics = {"split", "step", "epoch", "loss", "lr", "samples_per_s", "tokens_per_s",
                                           "time_s", "grad_norm", "best", "monitor"};
// The metrics the trainer writes, in the order a reader looks for them; others follow by name.
const std::vector<std::string> kMetricOrder = {"accuracy", "mae", "rmse", "mape", "smape", "mase", "pinball", "coverage"};

std::vector<std::string> val_metrics(const std::vector<RunHistory>& runs) {
  std::set<std::string> found;
  for (const RunHistory& r : runs)
    for (const nlohmann::json& rec : r.records)
      if (rec.value("split", "") == "val")
        for (const auto& [k, v] : rec.items())
          if (v.is_number() && !kNotMetrics.count(k) && k.rfind("baseline", 0) != 0) found.insert(k);
  std::vector<std::string> out;
  for (const std::string& k : kMetricOrder)
    if (found.erase(k)) out.push_back(k);
  out.insert(out.end(), found.begin(), found.end());
  return out;
}

// One series per run (and per split in `splits`): train solid, val dashed, test a marker.
std::vector<PlotSeries> series_of(const std::vector<RunHistory>& runs, const std::vector<std::string>& splits,
                                  const std::string& field, const std::string& x = "step", double scale = 1) {
  std::vector<PlotSeries> out;
  for (size_t i = 0; i < runs.size(); ++i)
    for (const std::string& split : splits) {
      PlotSeries s;
      s.run = runs[i].name;
      s.series = split + "_" + field;
      s.label = runs[i].name + " " + split + " " + field;
      s.color = color_of(i);
      s.dashed = split == "val";
      s.markers = split != "train";
      s.points = curve(runs[i], split, field, x);
      for (PlotPoint& p : s.points) p.y *= scale;
      if (!s.points.empty()) out.push_back(std::move(s));
    }
  return out;
}

std::string section(const std::string& id, const std::string& heading, const std::string& note, const std::string& body) {
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}{}</section>\n", id, escape_html(heading),
                     note.empty() ? "" : "<p class=\"note\">" + note + "</p>\n", body);
}

std::string swatch(size_t run) {
  return fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", color_of(run));
}

std::string run_header_cells(const std::vector<RunHistory>& runs) {
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i)
    out += fmt::format("<th data-run=\"{}\">{}{}</th>", escape_html(runs[i].name), swatch(i), escape_html(runs[i].name));
  return out;
}

std::string cell_text(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "&ndash;";
  if (v.is_number_float()) return escape_html(fmt::format("{:.6g}", v.get<double>()));
  if (v.is_string()) return escape_html(v.get<std::string>());
  return escape_html(v.dump());
}

std::string legend(const std::vector<RunHistory>& runs) {
  std::string out = "<ul id=\"legend\">\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunHistory& r = runs[i];
    out += fmt::format("<li data-run=\"{}\">{}<b>{}</b> <span class=\"path\">{}</span> &middot; {} record{}{}</li>\n",
                       escape_html(r.name), swatch(i), escape_html(r.name), escape_html(r.dir), r.records.size(),
                       r.records.size() == 1 ? "" : "s", r.summary.is_null() ? " &middot; no summary.json yet" : "");
  }
  return out + "</ul>\n<p class=\"note\">Solid lines: training; dashed: validation; a lone dot: the test split.</p>\n";
}

std::string curves(const std::vector<RunHistory>& runs) {
  std::string charts;
  charts += line_chart({"loss", "Loss", "optimizer step", "loss", true}, series_of(runs, {"train", "val", "test"}, "loss"));
  for (const std::string& m : val_metrics(runs))
    charts += line_chart({"val_" + m, "Validation " + m, "optimizer step", m, m != "accuracy"}, series_of(runs, {"val"}, m));
  return section("curves", "Loss and metrics", "", "<div class=\"charts\">\n" + charts + "</div>\n");
}

std::string speed(const std::vector<RunHistory>& runs) {
  std::string charts;
  charts += line_chart({"lr", "Learning rate", "optimizer step", "lr"}, series_of(runs, {"train"}, "lr"));
  charts += line_chart({"grad_norm", "Gradient norm (before clipping)", "optimizer step", "norm", true},
                       series_of(runs, {"train"}, "grad_norm"));
  charts += line_chart({"throughput", "Throughput", "optimizer step", "samples/s"}, series_of(runs, {"train"}, "samples_per_s"));
  // The "data" record closing each epoch: the share of its training time spent waiting for the loader.
  auto wait = series_of(runs, {"data"}, "data_wait_share", "epoch", 100.0);
  for (PlotSeries& s : wait) s.markers = true;
  charts += line_chart({"data_wait", "Data wait", "epoch", "% of the epoch's training time"}, wait);
  return section("speed", "Learning rate, throughput and data wait",
                 "Data wait above a few percent means the loader starves the model: raise data.workers or set "
                 "data.cache.",
                 "<div class=\"charts\">\n" + charts + "</div>\n");
}

std::string final_metrics(const std::vector<RunHistory>& runs) {
  std::vector<std::string> keys;
  for (const RunHistory& r : runs)
    if (r.summary.is_object())
      for (const auto& [k, v] : r.summary.items())
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::string rows;
  for (const std::string& k : keys) {
    rows += fmt::format("<tr data-key=\"{}\"><th>{}</th>", escape_html(k), escape_html(k));
    for (const RunHistory& r : runs)
      rows += "<td>" + (r.summary.is_object() && r.summary.contains(k) ? cell_text(r.summary[k]) : "&ndash;") + "</td>";
    rows += "</tr>\n";
  }
  const std::string body = keys.empty() ? "<p class=\"empty\">No run has a summary.json yet (it is written when a run ends).</p>\n"
                                        : "<table id=\"final-metrics\">\n<thead><tr><th>summary.json</th>" +
                                              run_header_cells(runs) + "</tr></thead>\n<tbody>\n" + rows + "</tbody></table>\n";
  return section("final", "Final metrics", "", body);
}

std::string config_diff(const std::vector<RunHistory>& runs) {
  std::vector<std::map<std::string, std::string>> configs;
  for (const RunHistory& r : runs) configs.push_back(r.config);
  const auto diffs = config_differences(configs);
  std::string note, body;
  if (runs.size() < 2) {
    note = "One run: nothing to compare.";
  } else if (diffs.empty()) {
    note = "The runs' configs are the same in every key.";
  } else {
    note = fmt::format("{} of {} keys differ (config.yaml of each run, flattened to dotted keys).", diffs.size(),
                       configs.front().size());
    std::string rows;
    for (const ConfigDifference& d : diffs) {
      rows += fmt::format("<tr data-key=\"{}\"><th>{}</th>", escape_html(d.key), escape_html(d.key));
      for (const auto& v : d.values) rows += "<td>" + (v ? escape_html(*v) : "<i>absent</i>") + "</td>";
      rows += "</tr>\n";
    }
    body = "<table id=\"config-diff\">\n<thead><tr><th>key</th>" + run_header_cells(runs) + "</tr></thead>\n<tbody>\n" +
           rows + "</tbody></table>\n";
  }
  return section("config", "Config differences", note, body);
}

const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 8px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.note { color: #555; margin: 4px 0 10px; }
.path { color: #777; font-family: ui-monospace, monospace; font-size: 12px; }
#legend { list-style: none; padding: 0; margin: 8px 0; }
#legend li { margin: 2px 0; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { border: 1px solid #eee; background: #fff; max-width: 100%; height: auto; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #444; }
svg.chart text.title { font-size: 13px; font-weight: 600; fill: #222; }
svg.chart text.empty { font-size: 13px; fill: #999; }
svg.chart .grid line { stroke: #ececec; }
svg.chart rect.frame { fill: none; stroke: #bbb; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
thead th { background: #f6f6f6; }
tbody th { font-weight: normal; font-family: ui-monospace, monospace; }
td { font-family: ui-monospace, monospace; }
)";

}  // namespace

std::string report_html(const std::vector<RunHistory>& runs) {
  std::string names;
  for (const RunHistory& r : runs) names += (names.empty() ? "" : ", ") + r.name;
  std::string page = fmt::format(
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>seqtrain report: {0}</title>\n"
      "<style>{1}</style>\n</head>\n<body>\n<h1>seqtrain report</h1>\n<p class=\"note\">{2} run{3}, drawn by seqtrain {4} "
      "from each run's metrics.jsonl, summary.json and config.yaml.</p>\n",
      escape_html(names), kStyle, runs.size(), runs.size() == 1 ? "" : "s", escape_html(build_info().version));
  page += legend(runs);
  page += curves(runs);
  page += speed(runs);
  page += final_metrics(runs);
  page += config_diff(runs);
  return page + "</body>\n</html>\n";
}

void write_report(const std::vector<std::string>& run_dirs, const std::string& out) {
  ST_CHECK(!run_dirs.empty(), "report: give at least one run directory (seqtrain report runs/a runs/b --out report.html)");
  ST_CHECK(!out.empty(), "report: give the page to write with --out, e.g. --out report.html");
  std::error_code ec;
  ST_CHECK(!fs::is_directory(out, ec), "report: --out '{}' is a directory; give the file to write, e.g. {}",
           out, (fs::path(out) / "report.html").string());
  const fs::path parent = fs::path(out).parent_path();
  ST_CHECK(parent.empty() || fs::is_directory(parent, ec),
           "report: --out '{}': the directory '{}' does not exist; create it first (mkdir -p {}) or write the "
           "report elsewhere", out, parent.string(), parent.string());
  std::vector<RunHistory> runs;
  for (const std::string& d : run_dirs) runs.push_back(read_run_history(d));
  name_runs(runs);
  write_file_atomic(out, report_html(runs));
}

}  // namespace seqtrain
