// CharLm forward/backward and the one-token step. See char_lm.h.
#include "models/char_lm.h"

#include <cmath>
#include <cstring>

#include "models/registry.h"
#include "models/token_ids.h"

namespace seqtrain {

namespace {
// Checked before any member is built, so a bad spec is one clear message.
const ModelSpec& checked(const ModelSpec& s) {
  ST_CHECK(family(s.type).is_language_model, "CharLm: model.type must be {}, got {}",
           family_names_where([](const ModelFamily& f) { return f.is_language_model; }), s.type);
  ST_CHECK(s.vocab_size > 0,
           "model.type {} needs a vocabulary: it is taken from a text data source (data.source: text), got vocab_size {}",
           s.type, s.vocab_size);
  ST_CHECK(!s.bidirectional,
           "model.bidirectional: true cannot be used with model.type {}: a language model predicts the next token "
           "and must not see the tokens after it; set model.bidirectional: false",
           s.type);
  ST_CHECK(s.embed_size > 0, "model.embed_size must be at least 1, got {}", s.embed_size);
  return s;
}

float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }
}  // namespace

CharLm::CharLm(const ModelSpec& spec, const ModelEnv& env)
    : TextModel(checked(spec), env),
      lstm_(rnn_cell(spec.type) == RnnCell::lstm),
      embed_(params_, "embed", spec.vocab_size, spec.embed_size),
      rnn_(params_, "rnn", lstm_ ? RnnCell::lstm : RnnCell::gru, spec.embed_size, spec.hidden, spec.layers, false,
           spec.dropout, rnn_options(spec, env)),
      drop_(spec.dropout, &params_.backend()),
      head_(params_, "head", spec.hidden, spec.vocab_size) {
  finish_params();
}

void CharLm::init_params(Rng& rng) {
  embed_.init(rng);
  rnn_.init(rng);
  head_.init(rng);
}

Tensor CharLm::forward(const Batch& batch, StepContext& ctx) {
  const Tensor& x = batch.inputs;
  Arena& arena = ctx.arena;
  // [batch, T], or [batch, T, 1] as the trainer's loader hands over windows of one feature.
  Tensor ids = token_ids(params_.backend(), x, arena, spec_.type, spec_.vocab_size,
                         ctx.host_batch ? &ctx.host_batch->inputs : nullptr);
  B_ = ids.shape[0];
  T_ = ids.shape[1];
  Tensor e = embed_.forward(ids, arena, /*ids_checked=*/true);      // token_ids checked them: [B, T, E]
  Tensor top = rnn_.forward(e, arena, ctx.training, ctx.dropout_seed);  // [T, B, H]
  Tensor h = drop_.forward(transpose01(params_.backend(), top, arena), arena, ctx.training, mix_seed(ctx.dropout_seed, 0x4ead));  // [B, T, H]
  return head_.forward(h, arena);                                    // [B, T, V]
}

void CharLm::backward(StepContext& ctx) {
  const Tensor& dlogits = ctx.output_grad;
  Arena& arena = ctx.arena;
  const Shape want{B_, T_, spec_.vocab_size};
  ST_CHECK(dlogits.numel() == numel_of(want) && dlogits.contiguous(), "{}: logit gradient {} does not match logits {}",
           spec_.type, shape_str(dlogits.shape), shape_str(want));
  Tensor dh = drop_.backward(head_.backward(dlogits.reshape(want), arena), arena);  // [B, T, H]
  Tensor de = rnn_.backward(transpose01(params_.backend(), dh, arena), arena, true);                         // [B, T, E]
  embed_.backward(de, arena);
  ctx.note_scratch(rnn_.checkpoint_scratch_bytes());
}

CharLmState CharLm::initial_state() const {
  CharLmState s;
  s.h.assign(spec_.layers, std::vector<float>(spec_.hidden, 0.f));
  if (lstm_) s.c.assign(spec_.layers, std::vector<float>(spec_.hidden, 0.f));
  return s;
}

std::unique_ptr<GenState> CharLm::begin() const { return std::make_unique<CharLmState>(initial_state()); }

void CharLm::next_logits(GenState& state, int64_t token, float* logits) {
  auto* s = dynamic_cast<CharLmState*>(&state);
  ST_CHECK(s != nullptr, "{}: the generation state was not made by this model's begin()", spec_.type);
  step(token, *s, logits);
}

void CharLm::step(int64_t id, CharLmState& state, float* logits) {
  const int64_t V = spec_.vocab_size, H = spec_.hidden, G = lstm_ ? 4 : 3;
  ST_CHECK(id >= 0 && id < V, "{}: token id {} is outside the vocabulary of {} ids (valid 0..{})", spec_.type, id, V,
           V - 1);
  ST_CHECK(static_cast<int64_t>(state.h.size()) == spec_.layers, "{}: state has {} layers, the model {}", spec_.type,
           state.h.size(), spec_.layers);
  const HostReadView host = params_.read_view();  // the store itself on a host-accessible backend
  auto p = [&](const std::string& name) { return host.data() + params_.find(name)->offset; };
  std::vector<float> x(p("embed.weight") + id * spec_.embed_size, p("embed.weight") + (id + 1) * spec_.embed_size);
  std::vector<float> gi(G * H), gh(G * H);
  for (int64_t k = 0; k < spec_.layers; ++k) {
    const std::string l = std::to_string(k);
    const float *w_ih = p("rnn.weight_ih_l" + l), *w_hh = p("rnn.weight_hh_l" + l);
    const float *b_ih = p("rnn.bias_ih_l" + l), *b_hh = p("rnn.bias_hh_l" + l);
    const int64_t C = static_cast<int64_t>(x.size());
    std::vector<float>& h = state.h[k];
    for (int64_t r = 0; r < G * H; ++r) {
      double si = b_ih[r], sh = b_hh[r];
      for (int64_t j = 0; j < C; ++j) si += static_cast<double>(w_ih[r * C + j]) * x[j];
      for (int64_t j = 0; j < H; ++j) sh += static_cast<double>(w_hh[r * H + j]) * h[j];
      gi[r] = static_cast<float>(si);
      gh[r] = static_cast<float>(sh);
    }
    if (lstm_) {  // gates i, f, g, o
      std::vector<float>& c = state.c[k];
      for (int64_t j = 0; j < H; ++j) {
        const float i = sigmoid(gi[j] + gh[j]), f = sigmoid(gi[H + j] + gh[H + j]);
        const float g = std::tanh(gi[2 * H + j] + gh[2 * H + j]), o = sigmoid(gi[3 * H + j] + gh[3 * H + j]);
        c[j] = f * c[j] + i * g;
        h[j] = o * std::tanh(c[j]);
      }
    } else {  // gates r, z, n; the reset gate scales W_hn h + b_hn (PyTorch's GRU)
      for (int64_t j = 0; j < H; ++j) {
        const float r = sigmoid(gi[j] + gh[j]), z = sigmoid(gi[H + j] + gh[H + j]);
        const float nn = std::tanh(gi[2 * H + j] + r * gh[2 * H + j]);
        h[j] = (1.f - z) * nn + z * h[j];
      }
    }
    x = h;
  }
  const float *w = p("head.weight"), *b = p("head.bias");
  for (int64_t v = 0; v < V; ++v) {
    double s = b[v];
    for (int64_t j = 0; j < H; ++j) s += static_cast<double>(w[v * H + j]) * x[j];
    logits[v] = static_cast<float>(s);
  }
}

}  // namespace seqtrain
