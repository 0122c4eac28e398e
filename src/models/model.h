// Model: a fixed list of layers over one ParamStore. forward() maps a batch of windows to
// predictions; backward() takes d(loss)/d(predictions) and accumulates every parameter's
// gradient into the ParamStore's gradient buffer. Activations live in the caller's Arena,
// which must not be reset between forward() and backward().
#pragma once
#include <memory>
#include <string>

#include "core/arena.h"
#include "core/rng.h"
#include "backend/backend.h"
#include "nn/params.h"
#include "nn/rnn.h"

namespace seqtrain {

struct ModelSpec {
  std::string type = "lstm";  // lstm | gru | mlp | char_lstm | char_gru
  int64_t input_size = 1;     // features per time step
  int64_t lookback = 1;       // time steps per window (the MLP flattens them)
  int64_t hidden = 64;
  int64_t layers = 1;
  bool bidirectional = false;
  float dropout = 0.f;        // between RNN layers and before the head, training only
  int64_t output_size = 1;    // horizon * targets
  std::string rnn_impl = "fused";  // fused | onednn: which kernels run the RNN layers
  // Mixed precision of the RNN layers: fp32 | bf16 | fp16 | auto (bf16 where the CPU has native
  // bf16). bf16/fp16 = 16-bit GEMM inputs with fp32 accumulation; master weights, gradients,
  // optimizer state, gate math, cell state, loss and reductions stay fp32. Fused kernels only.
  // fp16 needs loss scaling (optim/loss_scaler.h), which the trainer adds.
  std::string precision = "fp32";
  bool grad_checkpoint = false;  // recompute each RNN layer's saved state inside backward
  bool autotune = false;         // time fused vs oneDNN per RNN layer shape at the first step
  // Character language models (char_lstm / char_gru) only; the forecasters ignore both.
  int64_t vocab_size = 0;        // from the text source's vocabulary, not from the config
  int64_t embed_size = 32;       // model.embed_size
  // Which parameters weight decay applies to (train.optimizer.decay): all (torch's
  // AdamW(model.parameters())) or matrices (2-D+ weights except embeddings, as nanoGPT).
  std::string decay = "all";
  // runtime.backend: the device every layer of the model computes on (cpu | reference). The
  // model puts it on its ParamStore, where layers, the optimizer and clipping find it.
  std::string backend = "cpu";
  bool operator==(const ModelSpec&) const = default;
};

class TextGenerator;

class Model {
 public:
  virtual ~Model() = default;
  // x: [batch, lookback, input_size] f32, contiguous. Returns [batch, output_size].
  // (Char LMs: x is [batch, T] token ids, the result [batch, T, vocab] logits; models/char_lm.h.)
  virtual Tensor forward(const Tensor& x, Arena& arena, bool training) = 0;
  // dy: [batch, output_size]. Adds into params().grads().
  virtual void backward(const Tensor& dy, Arena& arena) = 0;
  // PyTorch default initialisation, drawn from rng.
  virtual void init(Rng& rng) = 0;
  // Seeds the dropout masks of the next forward pass.
  void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }

  // Models with RNN layers override these three; the rest have none of it.
  // The RNN layers' autotuner (null unless spec.autotune): export_json()/import_json() for the
  // run directory's cache, log_lines() for the log.
  virtual Autotuner* autotuner() { return nullptr; }
  // Activation bytes held outside the caller's Arena (gradient checkpointing's per-layer
  // recompute arena); a step's activation memory is arena.high_water() + this.
  virtual size_t extra_activation_bytes() const { return 0; }
  // Why the RNN runs in the precision it does (e.g. "precision auto -> bf16: ..."); empty when
  // the model has no mixed-precision layers.
  virtual const std::string& precision_note() const {
    static const std::string none;
    return none;
  }

  // Models that generate text return their TextGenerator (models/text_generator.h); the
  // registry's text_generator() is the checked way to ask.
  virtual TextGenerator* as_text_generator() { return nullptr; }

  ParamStore& params() { return params_; }
  const ModelSpec& spec() const { return spec_; }

 protected:
  // Sets the ParamStore's backend before the derived model builds its layers.
  explicit Model(ModelSpec spec) : spec_(std::move(spec)) { params_.set_backend(backend_named(spec_.backend)); }
  // Ends parameter registration: finalizes the store and sets each entry's `decay` from
  // spec_.decay. Every model's constructor calls it once its layers are built.
  void finish_params();
  ModelSpec spec_;
  ParamStore params_;
  uint64_t dropout_seed_ = 0;
};

// Builds the model of spec.type's family (models/registry.h); error listing the registered types
// when spec.type is none of them.
std::unique_ptr<Model> make_model(const ModelSpec& spec);

// The RNN layers' options a spec asks for (kernels, precision, checkpointing, autotune), shared
// by every model with an RnnStack; *note receives why the RNN runs in its precision.
RnnOptions rnn_options(const ModelSpec& spec, std::string* note);

// Sets every entry's `decay` by the policy: "all" decays everything, "matrices" only entries
// of 2+ dimensions that are not embeddings. Anything else throws Error naming train.optimizer.decay.
void apply_decay_policy(ParamStore& params, const std::string& policy);

}  // namespace seqtrain
