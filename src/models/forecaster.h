// Forecaster: RNN over the window -> output at the last time step -> dropout -> Linear to
// horizon*targets. Mirrors python/seqtrain_torch/models.py::Forecaster (names rnn.*, head.*).
#pragma once
#include "models/model.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace seqtrain {

class Forecaster : public Model {
 public:
  explicit Forecaster(const ModelSpec& spec);
  Tensor forward(const Tensor& x, Arena& arena, bool training) override;
  void backward(const Tensor& dy, Arena& arena) override;
  void init(Rng& rng) override;

  RnnStack& rnn() { return rnn_; }
  // Activation bytes held outside the caller's Arena (gradient checkpointing's per-layer
  // recompute arena); a step's activation memory is arena.high_water() + this.
  size_t extra_activation_bytes() const { return rnn_.checkpoint_scratch_bytes(); }
  // The RNN layers' autotuner (null unless spec.autotune): export_json()/import_json() for the
  // run directory's cache, log_lines() for the log.
  Autotuner* autotuner() { return rnn_.autotuner(); }
  // Why the RNN runs in the precision it does (e.g. "precision auto -> bf16: ...").
  const std::string& precision_note() const { return precision_note_; }

 private:
  std::string precision_note_;  // declared before rnn_: rnn_'s initialiser writes it
  RnnStack rnn_;
  Dropout drop_;
  Linear head_;
  Shape top_shape_;  // [T, N, H*D] of the last forward
};

// The model's autotuner when it is a Forecaster or CharLm with spec.autotune, else nullptr.
Autotuner* model_autotuner(Model& model);

}  // namespace seqtrain
