// Shared helpers for the test suite: temporary directories, .npy exchange with the PyTorch
// reference scripts in tests/py/, and a skip when python3-torch is missing.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

// EXPECT_CONTAINS(text, part): the text holds the part (error messages name file, key, fix).
#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "missing '" << (part) << "' in: " << (text)

namespace seqtrain::testing {

// Central differences of a scalar function of v, one element at a time, in double: the
// finite-difference reference every analytic backward is checked against.
inline std::vector<double> numgrad(std::vector<double>& v, const std::function<double()>& f,
                                   double eps = 1e-6) {
  std::vector<double> g(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + eps;
    const double lp = f();
    v[i] = keep - eps;
    const double lm = f();
    v[i] = keep;
    g[i] = (lp - lm) / (2 * eps);
  }
  return g;
}

// n normal draws from rng, times scale: test inputs and weights.
inline std::vector<float> randn(Rng& rng, int64_t n, float scale = 1.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

// The message of the seqtrain::Error thrown by f, or "<no error>".
// A language model's batch of x.size() == y.size() tokens over a vocabulary of V: targets drawn
// from rng, each input a fixed function of its target, so there is something to learn.
inline void random_token_batch(Rng& rng, int64_t V, std::vector<float>& x, std::vector<int64_t>& y) {
  for (size_t i = 0; i < y.size(); ++i) {
    y[i] = std::min<int64_t>(V - 1, static_cast<int64_t>(rng.uniform() * static_cast<float>(V)));
    x[i] = static_cast<float>((y[i] + 3) % V);
  }
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

namespace fs = std::filesystem;

inline std::string source_dir() { return SEQTRAIN_SOURCE_DIR; }
inline std::string seqtrain_binary() { return SEQTRAIN_BINARY; }

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "seqtrain_test_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::error_code ec; fs::remove_all(path, ec); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Writes `text` to dir/name (bytes as given) and returns the path.
inline std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

inline int run_command(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// True when Debian's python3 with torch and numpy can run the reference scripts.
inline bool torch_available() {
  static int ok = -1;
  if (ok < 0) ok = run_command("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
  return ok == 1;
}

#define SEQTRAIN_REQUIRE_TORCH()                                                       \
  do {                                                                                 \
    if (!::seqtrain::testing::torch_available())                                       \
      GTEST_SKIP() << "python3-torch is not installed (run scripts/setup.sh); skipped"; \
  } while (0)

// Runs tests/py/<script> with args; the script's stderr is shown on failure by the caller.
inline int run_python(const std::string& script, const std::string& args) {
  std::string cmd = "OMP_NUM_THREADS=1 PYTHONPATH=" + source_dir() + "/python /usr/bin/python3 " +
                    source_dir() + "/tests/py/" + script + " " + args;
  return run_command(cmd);
}

// Minimal .npy v1 writer/reader (little-endian, C order) for exchanging arrays with numpy.
template <typename T> inline const char* npy_descr();
template <> inline const char* npy_descr<float>() { return "<f4"; }
template <> inline const char* npy_descr<double>() { return "<f8"; }
template <> inline const char* npy_descr<int64_t>() { return "<i8"; }

template <typename T>
inline void write_npy(const std::string& path, const T* data, const std::vector<int64_t>& shape) {
  std::string sh = "(";
  size_t n = 1;
  for (auto d : shape) { sh += std::to_string(d) + ","; n *= d; }
  sh += ")";
  std::string header = std::string("{'descr': '") + npy_descr<T>() + "', 'fortran_order': False, 'shape': " + sh + ", }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data), n * sizeof(T));
}
template <typename T>
inline void write_npy(const std::string& path, const std::vector<T>& v, const std::vector<int64_t>& shape) {
  write_npy(path, v.data(), shape);
}

// Reads a float32 or float64 .npy (as written by numpy.save) into doubles.
inline std::vector<double> read_npy(const std::string& path, std::vector<int64_t>* shape = nullptr) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  char magic[8];
  f.read(magic, 8);
  uint32_t hl = 0;
  if (magic[6] == 1) { uint16_t h; f.read(reinterpret_cast<char*>(&h), 2); hl = h; }
  else f.read(reinterpret_cast<char*>(&hl), 4);
  std::string header(hl, '\0');
  f.read(header.data(), hl);
  bool f8 = header.find("<f8") != std::string::npos;
  auto p = header.find("'shape': (") + 10;
  auto q = header.find(")", p);
  std::vector<int64_t> sh;
  size_t n = 1;
  std::string dims = header.substr(p, q - p);
  for (size_t i = 0; i < dims.size();) {
    size_t j = dims.find(',', i);
    if (j == std::string::npos) j = dims.size();
    std::string tok = dims.substr(i, j - i);
    if (tok.find_first_of("0123456789") != std::string::npos) { sh.push_back(std::stoll(tok)); n *= sh.back(); }
    i = j + 1;
  }
  std::vector<double> out(n);
  if (f8) f.read(reinterpret_cast<char*>(out.data()), n * 8);
  else {
    std::vector<float> tmp(n);
    f.read(reinterpret_cast<char*>(tmp.data()), n * 4);
    for (size_t i = 0; i < n; ++i) out[i] = tmp[i];
  }
  if (shape) *shape = sh;
  return out;
}

// max |a - b| / max(max |b|, floor): the error relative to the tensor's scale (sizes must match).
inline double scaled_err(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-30) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = floor;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return err / scale;
}

// max |a - b| / max |b|: the relative error measure used by every parity test.
template <typename A, typename B>
inline double rel_err(const A& a, const B& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::size(a) && i < std::size(b); ++i) {
    num = std::max(num, std::abs(double(a[i]) - double(b[i])));
    den = std::max(den, std::abs(double(b[i])));
  }
  return den == 0 ? num : num / den;
}

// Floats widened to doubles, for the naive double references the layer tests compare against.
inline std::vector<double> to_double(const float* p, int64_t n) { return std::vector<double>(p, p + n); }
inline std::vector<double> to_double(const std::vector<float>& v) {
  return to_double(v.data(), static_cast<int64_t>(v.size()));
}

}  // namespace seqtrain::testing
