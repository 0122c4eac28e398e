// The masked-attention test cases shared by the CPU kernels' tests (test_attention.cpp) and the
// CUDA kernels' (test_cuda_attention.cpp): shapes with their key-padding patterns, the inputs
// they draw, and the comparison of an op's outputs with a reference's (y, lse with its -inf rows,
// and dq, dk, dv each on its own scale).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

// none; lengths: row b keeps keys [0, len_b) with len_b cycling 2T/3, T, 0 (a sequence of
// padding only); random: each key padding with probability 0.3, and key 0 of row 0 always
// (so a causal row 0 sees no key).
enum class Pad { none, lengths, random };

struct MaskCase {
  int64_t B, T, C, H;
  float p;
  bool causal;
  Pad pad;
};

inline std::string case_name(const MaskCase& c) {
  static const char* pads[] = {"", "_lengths", "_randompad"};
  return "B" + std::to_string(c.B) + "T" + std::to_string(c.T) + "C" + std::to_string(c.C) + "H" + std::to_string(c.H) +
         (c.causal ? "_causal" : "_full") + pads[static_cast<int>(c.pad)] + (c.p > 0 ? "_dropout" : "");
}

inline std::vector<uint8_t> padding_mask(const MaskCase& c) {
  std::vector<uint8_t> m(c.B * c.T, 0);
  Rng rng(3);
  for (int64_t b = 0; b < c.B; ++b) {
    const int64_t len = b % 3 == 0 ? 2 * c.T / 3 : b % 3 == 1 ? c.T : 0;
    for (int64_t j = 0; j < c.T; ++j) {
      if (c.pad == Pad::lengths) m[b * c.T + j] = j >= len;
      if (c.pad == Pad::random) m[b * c.T + j] = rng.uniform() < 0.3f || (b == 0 && j == 0);
    }
  }
  return m;
}

struct Inputs {
  std::vector<float> qkv, dy;
  std::vector<uint8_t> mask;
};
inline Inputs inputs(const MaskCase& c) {
  Rng rng(1);
  Inputs in{randn(rng, c.B * c.T * 3 * c.C), randn(rng, c.B * c.T * c.C), {}};
  in.mask = padding_mask(c);
  return in;
}

struct Result {
  std::vector<float> y, lse, dqkv;
};

// lse: -inf exactly where the reference has it (rows that see no key), within tol elsewhere.
inline void expect_lse_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  std::vector<double> g, w;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::isinf(got[i]), std::isinf(want[i])) << "lse " << i << ": " << got[i] << " vs " << want[i];
    if (std::isinf(want[i])) {
      EXPECT_LT(got[i], 0.f) << "lse " << i;
    } else {
      g.push_back(got[i]);
      w.push_back(want[i]);
    }
  }
  EXPECT_LT(rel_err(g, w), tol) << "lse";
}
inline void expect_lse_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  expect_lse_close(got, std::vector<double>(want.begin(), want.end()), tol);
}

// dq, dk and dv (thirds of each dqkv row) on their own: their scales differ.
inline std::vector<float> part_of(const std::vector<float>& dqkv, const MaskCase& c, int part) {
  std::vector<float> out;
  for (int64_t row = 0; row < c.B * c.T; ++row)
    for (int64_t k = 0; k < c.C; ++k) out.push_back(dqkv[row * 3 * c.C + part * c.C + k]);
  return out;
}

// Every output finite, and y, lse, dqkv and each of its parts within tol of the reference's.
inline void expect_close(const Result& got, const Result& want, const MaskCase& c, double tol) {
  for (float v : got.y) ASSERT_TRUE(std::isfinite(v)) << "y";
  for (float v : got.dqkv) ASSERT_TRUE(std::isfinite(v)) << "dqkv";
  EXPECT_LT(rel_err(got.y, want.y), tol) << "y";
  expect_lse_close(got.lse, want.lse, tol);
  EXPECT_LT(rel_err(got.dqkv, want.dqkv), tol) << "dqkv";
  for (int part = 0; part < 3; ++part)
    EXPECT_LT(rel_err(part_of(got.dqkv, c, part), part_of(want.dqkv, c, part)), tol) << "part " << part;
}

}  // namespace
}  // namespace seqtrain::testing
