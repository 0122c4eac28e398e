#include "data/csv.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "config/scalar.h"
#include "config/suggest.h"
#include "core/error.h"

namespace seqtrain {
namespace {

struct Cell {
  std::string text;  // unquoted, trimmed
  int64_t column;    // 1-based character position where the value starts, for messages
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Splits one line on commas, honouring "quoted, cells" with "" as an escaped quote.
// Into `cells` (cleared first, its capacity kept: a fleet's files are millions of lines).
void split_line(std::string_view line, const std::string& path, int64_t line_no, std::vector<Cell>& cells) {
  cells.clear();
  size_t i = 0;
  while (true) {
    while (i < line.size() && is_space(line[i])) ++i;
    Cell cell{"", static_cast<int64_t>(i) + 1};
    if (i < line.size() && line[i] == '"') {
      size_t j = i + 1;
      while (true) {
        if (j >= line.size())
          fail("{}:{}:{}: unterminated quoted cell; close it with '\"' on the same line", path, line_no, i + 1);
        if (line[j] == '"') {
          if (j + 1 < line.size() && line[j + 1] == '"') { cell.text += '"'; j += 2; continue; }
          break;
        }
        cell.text += line[j++];
      }
      i = j + 1;
      while (i < line.size() && is_space(line[i])) ++i;
      if (i < line.size() && line[i] != ',')
        fail("{}:{}:{}: unexpected text after a quoted cell; put a ',' after the closing quote", path, line_no,
             i + 1);
    } else {
      size_t j = line.find(',', i);
      if (j == std::string::npos) j = line.size();
      size_t e = j;
      while (e > i && is_space(line[e - 1])) --e;
      cell.text.assign(line.substr(i, e - i));
      i = j;
    }
    cells.push_back(std::move(cell));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
}

std::vector<Cell> split_line(std::string_view line, const std::string& path, int64_t line_no) {
  std::vector<Cell> cells;
  split_line(line, path, line_no, cells);
  return cells;
}

// The whole file as text, without a UTF-8 byte order mark (spreadsheet exports often start
// with one; it is not part of the first column's name).
std::string read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("{}: is a directory, not a CSV file; check data.path", path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("{}: cannot open the CSV file ({}); check data.path", path, std::strerror(errno));
  std::string text;
  char chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) fail("{}: cannot read the CSV file; check data.path", path);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  // A binary file read as text would show its bytes as column names: say what it is instead.
  if (text.compare(0, 6, "\x93NUMPY") == 0)
    fail("{}: is a NumPy .npy array, not a CSV file; this run reads CSV (a header row naming the columns, then one "
         "row of numbers per time step): convert it, or train a data.source: npy run to read .npy arrays",
         path);
  if (const size_t nul = text.find('\0', 0); nul != std::string::npos && nul < 4096)
    fail("{}: byte {} is a NUL: a binary file, not a CSV (text: a header row, then rows of numbers)", path, nul);
  return text;
}

// The header's position of each wanted column (all of them when `wanted` is empty).
std::vector<size_t> pick_columns(const std::vector<Cell>& header, const std::vector<std::string>& wanted,
                                 const std::string& path, int64_t line_no) {
  std::vector<std::string> names;
  for (const auto& c : header) names.push_back(c.text);
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (names[i] == names[j])
        fail("{}:{}:{}: column name '{}' appears twice in the header (columns {} and {}); rename one", path,
             line_no, header[i].column, names[i], j + 1, i + 1);
  std::vector<size_t> picks;
  for (const auto& want : wanted.empty() ? names : wanted) {
    size_t k = 0;
    while (k < names.size() && names[k] != want) ++k;
    if (k == names.size())
      fail("{}: no column named '{}'{}; the header has {}. Fix data.features / data.targets or the header",
           path, want, did_you_mean(want, names), quoted_list(names));
    picks.push_back(k);
  }
  return picks;
}

// Parses one data row's picked cells into `row`, applying the nan policy against the rows
// read so far. Returns false when the row is dropped.
// `previous` is the row ffill repeats: the kept row before this one (of the same series in a
// fleet), or -1 when there is none.
bool parse_row(const std::vector<Cell>& cells, const std::vector<size_t>& picks, const Series& s,
               const std::string& nan_policy, const std::string& path, int64_t line_no, int64_t previous,
               std::vector<float>& row) {
  for (size_t c = 0; c < picks.size(); ++c) {
    const Cell& cell = cells[picks[c]];
    std::optional<double> v;
    if (!cell.text.empty()) {
      v = parse_double(cell.text);
      if (!v)
        fail("{}:{}:{}: cell in column '{}' is not a number: '{}'; write a plain number like 3.7 or -1e-3",
             path, line_no, cell.column, s.columns[c], cell.text);
    }
    // Empty cells and nan/inf are missing values; so is a finite double that overflows float.
    bool missing = !v || !std::isfinite(static_cast<float>(*v));
    if (!missing) { row[c] = static_cast<float>(*v); continue; }
    std::string shown = cell.text.empty() ? "an empty cell" : "'" + cell.text + "'";
    if (nan_policy == "error")
      fail("{}:{}:{}: column '{}' has a missing or non-finite value ({}); fix the file, or set "
           "data.nan_policy to 'drop' (skip such rows) or 'ffill' (repeat the previous value)",
           path, line_no, cell.column, s.columns[c], shown);
    if (nan_policy == "drop") return false;
    if (previous < 0)
      fail("{}:{}:{}: column '{}' has a missing value ({}) in the first data row{}, so data.nan_policy "
           "'ffill' has no previous value to repeat; fix the row or use 'drop'",
           path, line_no, cell.column, s.columns[c], shown, s.segments.empty() ? "" : " of its series");
    row[c] = s.at(previous, static_cast<int64_t>(c));
  }
  return true;
}

// The time cell of a kept row, checked against the kept row before it (`previous`, of the same
// series in a fleet; -1: none).
void add_time(const Cell& cell, const std::string& column, Series& s, const std::string& path, int64_t line_no,
              int64_t previous) {
  const std::optional<Timestamp> t = parse_timestamp(cell.text);
  if (!t)
    fail("{}:{}:{}: cell '{}' of the time column '{}' (data.time_column) is not a timestamp; write dates as "
         "2024-03-05 or 20240305, times as 2024-03-05 13:30[:00], or plain numbers",
         path, line_no, cell.column, cell.text, column);
  if (s.times.empty()) s.time_kind = t->kind;
  if (t->kind != s.time_kind)
    fail("{}:{}:{}: cell '{}' of the time column '{}' (data.time_column) is written differently from the rows "
         "above ({}); write every time in one form", path, line_no, cell.column, cell.text, column,
         format_timestamp(s.times.front(), s.time_kind));
  if (previous >= 0 && t->seconds <= s.times[previous])
    fail("{}:{}:{}: the time column '{}' (data.time_column) does not increase{}: '{}' comes after {}; sort the rows "
         "by time and remove repeated times", path, line_no, cell.column, column,
         s.segments.empty() ? "" : " within the series '" + s.segments.back().id + "'", cell.text,
         format_timestamp(s.times[previous], s.time_kind));
  s.times.push_back(t->seconds);
}

// Rows of a fleet read in file order, grouped into one contiguous run per series id (in the
// order the ids first appear; each series' rows keep their order), so long-format files sorted
// by time rather than by id read the same as files sorted by id.
void group_series(Series& s, const std::vector<int32_t>& row_series, std::vector<SeriesSegment> ids) {
  std::vector<int64_t> count(ids.size(), 0);
  for (int32_t k : row_series) ++count[k];
  int64_t at = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    ids[k].begin = at;
    ids[k].end = at += count[k];
  }
  bool sorted = true;
  for (size_t r = 1; r < row_series.size() && sorted; ++r) sorted = row_series[r] >= row_series[r - 1];
  if (!sorted) {
    const int64_t cols = s.cols();
    std::vector<float> values(s.values.size());
    std::vector<int64_t> times(s.times.size());
    std::vector<int64_t> next(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) next[k] = ids[k].begin;
    for (size_t r = 0; r < row_series.size(); ++r) {
      const int64_t to = next[row_series[r]]++;
      std::copy_n(s.values.begin() + static_cast<int64_t>(r) * cols, cols, values.begin() + to * cols);
      if (!times.empty()) times[to] = s.times[r];
    }
    s.values = std::move(values);
    s.times = std::move(times);
  }
  s.segments = std::move(ids);
}

}  // namespace

std::string csv_cell(const std::string& text) {
  const bool plain = text.find_first_of(",\"\r\n") == std::string::npos &&
                     (text.empty() || (!is_space(text.front()) && !is_space(text.back())));
  if (plain) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::vector<std::string> read_csv_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the CSV file ({}); check the path", path, std::strerror(errno));
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> out;
    for (const Cell& c : split_line(line, path, line_no)) out.push_back(c.text);
    return out;
  }
  fail("{}: the file is empty; a CSV needs a header row naming the columns, then one row per time step", path);
}

namespace {

// The non-blank lines of a CSV's text, numbered from 1 as an editor numbers them; a trailing
// '\r' (a Windows file) is dropped.
struct CsvLines {
  const std::string& text;
  size_t at = 0;
  int64_t line_no = 0;
  std::string_view line;

  bool next() {
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      line = std::string_view(text).substr(at, end - at);
      at = end + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") != std::string_view::npos) return true;  // blank lines are skipped
    }
    return false;
  }
};

// Where the header puts the features, the time column and the series column (header.size():
// none); the feature columns are every column but those two when none are named.
struct CsvLayout {
  std::vector<size_t> picks;
  size_t time_at = 0, series_at = 0;
};

CsvLayout csv_layout(const std::vector<Cell>& header, const std::vector<std::string>& columns,
                     const std::string& time_column, const std::string& series_column, const std::string& path,
                     int64_t line_no) {
  CsvLayout out;
  std::vector<std::string> wanted = columns;
  out.time_at = out.series_at = header.size();
  for (size_t k = 0; k < header.size(); ++k) {
    if (!time_column.empty() && header[k].text == time_column) out.time_at = k;
    else if (!series_column.empty() && header[k].text == series_column) out.series_at = k;
    else if (columns.empty()) wanted.push_back(header[k].text);
  }
  for (const auto& [name, at, key] :
       {std::tuple{time_column, out.time_at, "data.time_column"}, {series_column, out.series_at, "data.series_id"}})
    if (!name.empty() && at == header.size()) {
      std::vector<std::string> names;
      for (const auto& c : header) names.push_back(c.text);
      fail("{}: no column named '{}' (config key {}){}; the header has {}. Fix {} or the header", path, name, key,
           did_you_mean(name, names), quoted_list(names), key);
    }
  out.picks = pick_columns(header, wanted, path, line_no);
  return out;
}

}  // namespace

Series read_csv(const std::string& path, const std::vector<std::string>& columns, const std::string& nan_policy,
                const std::string& time_column, const std::string& series_column) {
  ST_CHECK(nan_policy == "error" || nan_policy == "drop" || nan_policy == "ffill",
           "read_csv: nan_policy must be error, drop or ffill, got '{}'", nan_policy);
  const std::string text = read_text(path);
  CsvLines lines{text, 0, 0, {}};
  if (!lines.next())
    fail("{}: the file is empty; a CSV needs a header row naming the columns, then one row per time step", path);
  const std::vector<Cell> header = split_line(lines.line, path, lines.line_no);
  const CsvLayout layout = csv_layout(header, columns, time_column, series_column, path, lines.line_no);
  Series s;
  for (size_t k : layout.picks) s.columns.push_back(header[k].text);
  std::vector<float> row(layout.picks.size());
  // A fleet: each kept row's series, and each series' last kept row (what ffill and the time
  // order compare with).
  std::vector<int32_t> row_series;
  std::vector<SeriesSegment> ids;
  std::unordered_map<std::string, int32_t> id_index;
  std::vector<int64_t> last_row;
  std::vector<Cell> cells;
  while (lines.next()) {
    const int64_t line_no = lines.line_no;
    split_line(lines.line, path, line_no, cells);
    if (cells.size() != header.size())
      fail("{}:{}: expected {} cells like the header, got {}; every row needs one value per column", path,
           line_no, header.size(), cells.size());
    int32_t series = 0;
    if (!series_column.empty()) {
      const Cell& id = cells[layout.series_at];
      if (id.text.empty())
        fail("{}:{}:{}: the series id column '{}' (data.series_id) is empty; give every row its series' id", path,
             line_no, id.column, series_column);
      const auto [it, added] = id_index.try_emplace(id.text, static_cast<int32_t>(ids.size()));
      if (added) {
        ids.push_back({id.text, 0, 0});
        last_row.push_back(-1);
      }
      series = it->second;
      s.segments.assign(1, ids[series]);  // names the series in the messages below
    }
    const int64_t previous = series_column.empty() ? s.rows - 1 : last_row[series];
    if (!parse_row(cells, layout.picks, s, nan_policy, path, line_no, previous, row)) continue;
    if (!time_column.empty()) add_time(cells[layout.time_at], time_column, s, path, line_no, previous);
    s.values.insert(s.values.end(), row.begin(), row.end());
    if (!series_column.empty()) {
      row_series.push_back(series);
      last_row[series] = s.rows;
    }
    ++s.rows;
  }
  if (s.rows == 0)
    fail("{}: no data rows{}; add rows of numbers below the header", path,
         nan_policy == "drop" ? " left after dropping rows with missing values (data.nan_policy: drop)" : "");
  if (!series_column.empty()) group_series(s, row_series, std::move(ids));
  s.name = std::filesystem::path(path).stem().string();
  return s;
}

}  // namespace seqtrain
