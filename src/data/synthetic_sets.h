// Synthetic sets (`seqtrain data sets`): the set-classification task the set-encoder example
// (examples/set_encoder.yaml) trains on, in the shape of a microbiome sample — a variable number
// of feature vectors, one per taxon read, in no order. Each element is one of `taxa` taxon
// centroids plus noise; two of the taxa are markers, and the label says which markers the set
// holds (none, the first, the second, both: 4 classes). Presence is a property of the set, not of
// the order or of any one position, and a marker is a handful of elements among 20-300, so a
// model must look at every element (a mean over raw features dilutes a marker differently at
// every set size). Deterministic in the seed.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace seqtrain {

struct SetTaskOptions {
  int64_t samples = 2000;   // sets in the split
  int64_t min_size = 20, max_size = 300;  // elements per set; max_size is the padded T
  int64_t features = 16;    // F per element
  int64_t taxa = 8;         // centroids; taxa 0 and 1 are the markers
  float noise = 0.6f;       // std of each element around its centroid
  uint64_t seed = 0;        // the centroids (shared by every split) and the draws
  uint64_t split = 0;       // a split's own stream: train, val and test differ
};

struct SetSplit {
  std::vector<float> x;         // [samples, max_size, features], zeros after each set's length
  std::vector<int64_t> labels;  // [samples] in 0..3
  std::vector<int64_t> lengths; // [samples] in min_size..max_size
};

SetSplit make_set_split(const SetTaskOptions& options);

// Writes {train,val,test}_{x,y,len}.npy of the task into directory `out`, `samples` training
// sets and a fifth as many for validation and test, all nine files or none. Returns the
// split sizes. Serves `seqtrain data sets` and the service's set-encoder template.
std::array<int64_t, 3> write_set_task(const std::string& out, int64_t samples, uint64_t seed);

}  // namespace seqtrain
