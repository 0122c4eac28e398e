// Forecaster: RNN over the window -> one vector per sample (model.pooling: nn/sequence_pool.h;
// by default the output at the last time step, a sample's own last valid step when the batch
// has lengths) -> dropout -> Linear to
// horizon*targets (+ the window's own baseline with model.residual_to: models/residual_baseline.h).
// Under train.task masked_pretrain a ReconstructionHead (models/reconstruction_head.h) replaces the
// pooling and the head: every step's output is decoded back to the (masked) inputs.
// With known-future features (spec.future_steps: x's rows after the lookback) the RNN reads the
// lookback only and future_head, a Linear without bias over those rows flattened, adds to the
// head's output: together one Linear over [last output, known future]. Mirrors python/seqtrain_torch/models.py::Forecaster (names rnn.*, head.*).
// runtime.precision (ModelEnv::precision) applies to the RNN layers only; the head stays fp32: it
// is one [N, H*D] x [H*D, out] product a step (out = horizon*targets, a few columns), well under
// 1% of the step, so bf16 would gain nothing there, while it would round the very values the
// loss and the forecasts are read from (the bf16 tolerance tests compare them to fp32's).
#pragma once
#include <optional>

#include "models/model.h"
#include "models/quantile_output.h"
#include "models/reconstruction_head.h"
#include "models/residual_baseline.h"
#include "nn/sequence_pool.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace seqtrain {

class Forecaster : public Model {
 public:
  explicit Forecaster(const ModelSpec& spec, const ModelEnv& env = {});
  Tensor forward(const Batch& batch, StepContext& ctx) override;
  void backward(StepContext& ctx) override;

  // The pooled RNN output the head reads (before its dropout), [batch, hidden * directions].
  int64_t embedding_size() const override { return rnn_.output_size(); }
  Tensor embed(const Batch& batch, StepContext& ctx) override;

  RnnStack& rnn() { return rnn_; }

 private:
  void init_params(Rng& rng) override;
  Tensor encode(const Batch& batch, StepContext& ctx, bool training, Tensor* future);
  RnnStack rnn_;
  Tensor pool(const Tensor& top, std::span<const int64_t> lengths, Arena& arena);  // model.pooling
  Tensor unpool(const Tensor& dpooled, Arena& arena);                            // its gradient
  SequencePool pool_;
  Shape top_shape_;        // the last forward's RNN output [T, N, F]
  bool in_place_ = false;  // it pooled the last step of whole windows in place
  Dropout drop_;
  std::optional<Linear> head_;                // none under masked pretraining
  std::optional<ReconstructionHead> recon_;   // masked pretraining's decoder instead of the head
  std::optional<Linear> future_head_;
  ResidualBaseline residual_;
  QuantileOutput quantiles_;
};

}  // namespace seqtrain
