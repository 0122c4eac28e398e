// Synthetic sets: see synthetic_sets.h.
#include "data/synthetic_sets.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/rng.h"
#include "data/npy.h"
#include "io/atomic_dir.h"

namespace seqtrain {

SetSplit make_set_split(const SetTaskOptions& o) {
  ST_CHECK(o.samples >= 1 && o.features >= 1 && o.taxa >= 3 && 1 <= o.min_size && o.min_size <= o.max_size &&
               o.max_size >= 16,
           "synthetic sets: need samples >= 1, features >= 1, taxa >= 3 and 1 <= min_size <= max_size (>= 16)");
  const int64_t F = o.features, T = o.max_size;
  Rng centre_rng(mix_seed(o.seed, 0x5e75));
  std::vector<float> centroid(static_cast<size_t>(o.taxa * F));
  for (float& c : centroid) c = 1.5f * centre_rng.normal();
  Rng rng(mix_seed(mix_seed(o.seed, 0x5e76), o.split));
  SetSplit s;
  s.x.assign(static_cast<size_t>(o.samples * T * F), 0.f);
  s.labels.resize(static_cast<size_t>(o.samples));
  s.lengths.resize(static_cast<size_t>(o.samples));
  std::vector<int64_t> taxon;
  for (int64_t i = 0; i < o.samples; ++i) {
    const int64_t n = o.min_size + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.max_size - o.min_size + 1)));
    const int64_t label = static_cast<int64_t>(rng.below(4));
    taxon.clear();
    for (int64_t marker = 0; marker < 2; ++marker)
      if (label & (int64_t{1} << marker))
        for (int64_t k = 3 + static_cast<int64_t>(rng.below(6)); k > 0; --k) taxon.push_back(marker);
    while (static_cast<int64_t>(taxon.size()) < n)
      taxon.push_back(2 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.taxa - 2))));
    for (int64_t j = n - 1; j > 0; --j)  // no order: shuffle
      std::swap(taxon[static_cast<size_t>(j)], taxon[static_cast<size_t>(rng.below(static_cast<uint64_t>(j + 1)))]);
    float* xi = s.x.data() + i * T * F;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t f = 0; f < F; ++f)
        xi[j * F + f] = centroid[static_cast<size_t>(taxon[static_cast<size_t>(j)] * F + f)] + o.noise * rng.normal();
    s.labels[static_cast<size_t>(i)] = label;
    s.lengths[static_cast<size_t>(i)] = n;
  }
  return s;
}

}  // namespace seqtrain

namespace seqtrain {

std::array<int64_t, 3> write_set_task(const std::string& out, int64_t samples, uint64_t seed) {
  namespace fs = std::filesystem;
  // Every file is made in memory first and the directory published whole: a failure leaves none.
  const std::string tmp = out + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  ST_CHECK(!ec, "{}: cannot create {}: {} (choose a writable directory)", out, tmp, ec.message());
  const std::array<int64_t, 3> sizes = {samples, std::max<int64_t>(1, samples / 5), std::max<int64_t>(1, samples / 5)};
  const char* names[3] = {"train", "val", "test"};
  SetTaskOptions o;
  o.seed = seed;
  for (uint64_t k = 0; k < 3; ++k) {
    const int64_t n = sizes[k];
    o.samples = n;
    o.split = k;
    const SetSplit s = make_set_split(o);
    const std::string stem = (fs::path(tmp) / names[k]).string();
    write_file_atomic(stem + "_x.npy", npy_bytes_f32({n, o.max_size, o.features}, s.x.data(), stem + "_x.npy"));
    write_file_atomic(stem + "_y.npy", npy_bytes_i64({n}, s.labels.data(), stem + "_y.npy"));
    write_file_atomic(stem + "_len.npy", npy_bytes_i64({n}, s.lengths.data(), stem + "_len.npy"));
  }
  publish_dir(tmp, out);
  return sizes;
}

}  // namespace seqtrain
