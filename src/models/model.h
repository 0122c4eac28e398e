// Model: a fixed list of layers over one ParamStore. forward() maps a Batch (core/batch.h) to the
// model's result (forecasts, class logits, next-token logits); backward() takes the context's
// output_grad, d(loss)/d(result), and accumulates every parameter's gradient into the
// ParamStore's gradient buffer. Activations live in the context's Arena, which must not be reset
// between forward() and backward(). What a model reads of the batch is its family's business
// (inputs always; lengths or masks where it uses them); what is done with its result is the
// Objective's (train/objective.h). Kernel tuning, activation-memory and precision reporting are
// not part of a model: the caller lends the tuner and the run's precision policy at build time
// (ModelEnv), and layers report memory into the StepContext.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/batch.h"
#include "core/rng.h"
#include "backend/backend.h"
#include "backend/precision.h"
#include "nn/params.h"
#include "models/step_context.h"

namespace seqtrain {

struct ModelSpec {
  std::string type = "lstm";  // lstm | gru | mlp | char_lstm | char_gru | gpt | transformer | cnn (models/registry.h)
  int64_t input_size = 1;     // features per time step
  int64_t lookback = 1;       // time steps per window (the MLP flattens them)
  int64_t hidden = 64;
  int64_t layers = 1;
  bool bidirectional = false;
  float dropout = 0.f;        // between RNN layers and before the head, training only
  int64_t output_size = 1;    // horizon * targets
  std::string rnn_impl = "fused";  // fused | onednn: which kernels run the RNN layers
  // No precision here: runtime.precision is the run's policy (backend/precision.h), lent to the
  // model at build time in ModelEnv. (state.json's model_spec of older versions has a
  // "precision" field; spec_from_json ignores it.)
  bool grad_checkpoint = false;  // recompute each RNN layer's saved state (gpt: each block) inside backward
  bool autotune = false;         // time fused vs oneDNN per RNN layer shape at the first step
  // Language models: vocab_size (char_lstm, char_gru, gpt); embed_size (char_lstm / char_gru only).
  int64_t vocab_size = 0;        // from the text source's vocabulary, not from the config
  int64_t embed_size = 32;       // model.embed_size
  // Transformers (gpt, transformer) only: attention heads (divide hidden) and whether Linear and
  // LayerNorm layers have biases (nanoGPT's `bias`). gpt: hidden is n_embd, layers n_layer,
  // lookback the block.
  int64_t heads = 4;             // model.heads
  bool bias = true;              // model.bias
  // Which parameters weight decay applies to (train.optimizer.decay): all (torch's
  // AdamW(model.parameters())), 2d (every 2-D+ tensor, embeddings too: nanoGPT's groups) or
  // matrices (2-D+ weights except embeddings: minGPT's groups).
  std::string decay = "all";
  // runtime.backend: the device every layer of the model computes on (cpu | reference). The
  // model puts it on its ParamStore, where layers, the optimizer and clipping find it.
  std::string backend = "cpu";
  // Window forecasters (models/residual_baseline.h): model.residual_to (none | last_value |
  // seasonal_naive), the period it repeats (1 for last_value), and each target's feature index
  // in x, from the data.
  std::string residual_to = "none";
  int64_t residual_period = 1;
  std::vector<int64_t> residual_inputs = {};
  // train.loss quantile: forecasts per target and step (the innermost of the outputs), made
  // monotone so they never cross (Backend::monotone_quantiles_forward); 1 = one point forecast.
  int64_t quantile_levels = 1;
  // data.future_features: rows of x after the lookback holding the known future (the horizon),
  // read by the window forecasters' future_head; 0 = none.
  int64_t future_steps = 0;
  // Encoders: model.positions (transformer: auto = learned | sinusoidal | none), model.pooling (last |
  // mean | max | cls; transformer, lstm, gru: how a sample's valid steps become one vector) and
  // model.patch_size (transformer: steps per token).
  std::string positions = "auto";
  std::string pooling = "last";
  int64_t patch_size = 1;
  // cnn only (model.kernel_sizes): one "same"-padded Conv1d of this kernel per layer
  // (models/cnn_encoder.h); the other families ignore it.
  std::vector<int64_t> kernel_sizes = {8, 5, 3};
  // cnn only (model.norm): each conv's norm, "layer" (LayerNorm over the channels at every step)
  // or "batch" (BatchNorm1d over the channels, statistics over the batch's valid steps:
  // nn/batch_norm.h). Specs written before the field existed read "layer".
  std::string norm = "layer";
  // train.task masked_pretrain (lstm, gru, transformer): a reconstruction decoder replaces the head
  // (models/reconstruction_head.h); mask_fill and std_penalty are train.masking's fill and std_penalty.
  bool reconstruct = false;
  std::string mask_fill = "token";
  float std_penalty = 0.f;
  bool operator==(const ModelSpec&) const = default;
};

class TextGenerator;

// What the caller lends a model at build time beyond its spec: how the run computes, which the
// spec (what the model is) does not say.
// - autotuner: the training loop owns the kernel tuner (it reads and writes its cache in the run
//   directory and logs its decisions); models with tunable layers hand it to them. Null: the
//   layers tune on their own when the spec asks for it, and nobody reads their decisions.
// - precision: runtime.precision resolved once (backend/precision.h). The model hands it to the
//   layers that follow it (its registry entry's precision_covers says which); the training step's
//   loss scaling follows the same value. Default fp32.
struct ModelEnv {
  std::shared_ptr<Autotuner> autotuner{};
  Precision precision{};
  // The backend instance to build on instead of spec.backend's by-name one (its parameters are
  // this backend's memory): a device the caller owns, or a test's instrumented backend.
  Backend* backend = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  // Forecasters: batch.inputs [batch, lookback, input_size] f32 -> [batch, output_size].
  // Language models: [batch, T] token ids -> [batch, T, vocab] logits (models/char_lm.h).
  virtual Tensor forward(const Batch& batch, StepContext& ctx) = 0;
  // Reads ctx.output_grad (shaped like forward's result); adds into params().grads().
  virtual void backward(StepContext& ctx) = 0;
  // The checks forward makes of a host batch's values (token ids inside the vocabulary), alone:
  // a replayed step (train/step_graphs.h) runs no forward on the host, and must refuse the same
  // batches. The default has none.
  virtual void check_batch(const Batch& host) const { (void)host; }
  // PyTorch default initialisation, drawn from rng: init_params() writes on the host, inside a
  // ParamStore::HostParams scope (direct on a host-accessible backend; otherwise staged on the
  // host and uploaded once).
  void init(Rng& rng);

  // The encoder's pooled output: what the head reads, one vector per sample ([batch,
  // embedding_size()] f32, the model backend's memory, from ctx.arena), for the same Batch forward()
  // takes (its lengths honoured: model.pooling last | mean | max | cls over each sample's valid
  // steps). Always eval mode: no dropout, whatever ctx.training says; no backward follows it, and
  // the layers' saved state may be overwritten. `seqtrain embed` and export --encoder ask for it.
  // Models with an encoder (lstm/gru Forecaster, TransformerEncoder, the masked pretrainer) return
  // its width from embedding_size() and override embed(); the default 0 means "no encoder", and
  // the default embed() is an Error naming the model.type.
  virtual int64_t embedding_size() const { return 0; }
  virtual Tensor embed(const Batch& batch, StepContext& ctx);

  // Models that generate text return their TextGenerator (models/text_generator.h); the
  // registry's text_generator() is the checked way to ask.
  virtual TextGenerator* as_text_generator() { return nullptr; }

  ParamStore& params() { return params_; }
  const ModelSpec& spec() const { return spec_; }
  // The precision policy the model was built with (ModelEnv::precision).
  const Precision& precision() const { return precision_; }

 protected:
  // Sets the ParamStore's backend (env.backend, else spec.backend's) and keeps env.precision,
  // before the derived model builds its layers.
  explicit Model(ModelSpec spec, const ModelEnv& env = {}) : spec_(std::move(spec)), precision_(env.precision) {
    params_.set_backend(env.backend ? *env.backend : backend_named(spec_.backend));
  }
  // Ends parameter registration: finalizes the store and sets each entry's `decay` from
  // spec_.decay. Every model's constructor calls it once its layers are built.
  void finish_params();
  // The family's initialisation through its layers' init(), which write through param(i) views.
  virtual void init_params(Rng& rng) = 0;
  ModelSpec spec_;
  Precision precision_;
  ParamStore params_;
};

// Builds the model of spec.type's family (models/registry.h); error listing the registered types
// when spec.type is none of them.
std::unique_ptr<Model> make_model(const ModelSpec& spec, const ModelEnv& env = {});

// The RNN layers' options a spec and env ask for (kernels, checkpointing, autotune with the env's
// tuner, the env's precision), shared by every model with an RnnStack.
RnnOptions rnn_options(const ModelSpec& spec, const ModelEnv& env);

// Sets every entry's `decay` by the policy: "all" decays everything, "2d" every entry of 2+
// dimensions, "matrices" only entries of 2+ dimensions that are not embeddings. Anything else throws Error naming train.optimizer.decay.
void apply_decay_policy(ParamStore& params, const std::string& policy);

}  // namespace seqtrain
