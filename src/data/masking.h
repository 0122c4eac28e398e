// The masks of masked pretraining (train.task masked_pretrain): which inputs of a sample the model
// hides and learns to reconstruct. fill_batch (data/batch_layout.h) draws them into
// Batch::loss_mask, on whichever loader thread fills the batch, so a mask depends on nothing but
// (seed, stream, epoch, sample index): the same for any worker count and after a resume.
//
// A sample x [T, F] with valid length L (t >= L is padding, never masked). With r = mask_ratio:
//   patch  : the valid steps are cut into consecutive patches of patch_size steps from t = 0 (the
//            last one shorter when patch_size does not divide L), n = ceil(L / patch_size) of
//            them. k = floor(r n + u) patches (u uniform in [0, 1): r n rounded at random) are
//            chosen uniformly without replacement and masked over every feature. Each patch, so
//            each valid step, is masked with probability exactly r, and the count varies as
//            little as it can (moola's patch masking).
//   random : every valid (t, f) masked on its own with probability r.
//   span   : every feature on its own: a two-state Markov chain over t = 0 .. L-1 (Zerveas et al.
//            2021, "A transformer-based framework for multivariate time series representation
//            learning", geom_noise_mask_single). Masked runs have geometric lengths of mean
//            lm = mean_span (leave with probability 1/lm after each step), unmasked runs of mean
//            lm (1 - r) / r; the first step is masked with probability r, the chain's
//            stationary masked share, so every step is masked with probability r. Runs are drawn
//            whole (1 + floor(log u / log(1 - p)), the same law as a coin per step). Needs
//            r <= lm / (1 + lm), or an unmasked run would be shorter than a step (config check).
//
// Each sample draws from its own xoshiro generator (core/rng.h) seeded from its key: training
// masks change every epoch; validation and test masks (MaskDraw::per_sample) are fixed per
// sample for a seed, on their own stream, so their losses compare across epochs and runs.
#pragma once
#include <cstdint>
#include <span>

#include "core/rng.h"

namespace seqtrain {

struct MaskingConfig;  // config/config.h: train.masking

enum class MaskStrategy { patch, random, span };

struct MaskOptions {
  MaskStrategy strategy = MaskStrategy::patch;
  double ratio = 0.15;       // r: the expected share of valid positions masked, in (0, 1)
  int64_t patch_size = 8;    // patch: steps per patch, >= 1
  double mean_span = 3.0;    // span: mean masked run, >= 1
};
MaskOptions mask_options(const MaskingConfig& c);

enum class MaskDraw {
  per_epoch,   // training: a new mask every epoch
  per_sample,  // validation / test: one mask per sample, whatever the epoch
};

// Everything a batch's masks are drawn from besides the samples themselves.
struct SampleMasking {
  MaskOptions options;
  uint64_t seed = 0;  // the run's seed
  MaskDraw draw = MaskDraw::per_epoch;
  // The generator of `sample`'s mask in `epoch` (the epoch is ignored per_sample).
  Rng rng(int64_t epoch, int64_t sample) const;
};

// One sample's mask: mask [steps, features] = 1 where masked, 0 elsewhere (t >= length included).
void draw_mask(const MaskOptions& o, Rng& rng, int64_t steps, int64_t features, int64_t length, float* mask);

// A batch's masks: mask [samples.size(), steps, features]; lengths [samples.size()] or null (every
// sample whole).
void fill_masks(const SampleMasking& m, std::span<const int64_t> samples, int64_t epoch, int64_t steps,
                int64_t features, const int64_t* lengths, float* mask);

}  // namespace seqtrain
