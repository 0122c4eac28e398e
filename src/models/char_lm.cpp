// The RNN stack is batch-first in, time-major out ([T, B, H]); the head runs on that layout
// and only the logits are transposed to [B, T, V], the layout the targets [B, T] come in.
#include "models/char_lm.h"

#include <cmath>

namespace seqtrain {

namespace {
// [a, b, c] -> [b, a, c] into the arena.
Tensor swap01(const Tensor& t, Arena& arena) {
  const int64_t a = t.shape[0], b = t.shape[1], c = t.shape[2];
  Tensor out = arena.tensor({b, a, c});
  const float* src = t.f32();
  float* dst = out.f32();
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) dst[(j * a + i) * c + k] = src[(i * b + j) * c + k];
  return out;
}
}  // namespace

CharLM::CharLM(const ModelSpec& spec)
    : Model(spec),
      emb_(params_, "emb", spec.vocab, spec.hidden),
      rnn_(params_, "rnn", spec.type == "gru" ? RnnCell::gru : RnnCell::lstm, spec.hidden, spec.hidden, spec.layers,
           spec.bidirectional, spec.dropout, parse_rnn_impl(spec.rnn_impl)),
      drop_(spec.dropout),
      head_(params_, "head", rnn_.output_size(), spec.vocab) {
  ST_CHECK(spec.vocab > 0 && spec.input_size == 1, "CharLM: needs vocab > 0 and one id per step, got {} and {}",
           spec.vocab, spec.input_size);
  params_.finalize();
}

void CharLM::init(Rng& rng) {
  emb_.init(rng);
  rnn_.init(rng);
  head_.init(rng);
}

Tensor CharLM::forward(const Tensor& x, Arena& arena, bool training) {
  ST_CHECK(x.shape.size() >= 2 && x.numel() == x.shape[0] * x.shape[1],
           "CharLM: input must be [batch, steps, 1] token ids, got {}", shape_str(x.shape));
  batch_ = x.shape[0];
  steps_ = x.shape[1];
  Tensor ids = arena.tensor({batch_, steps_}, DType::i64);
  const float* xf = x.f32();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ST_CHECK(xf[i] >= 0 && std::floor(xf[i]) == xf[i], "CharLM: input {} at position {} is not a token id", xf[i], i);
    ids.data<int64_t>()[i] = static_cast<int64_t>(xf[i]);
  }
  Tensor e = emb_.forward(ids, arena);  // [B, T, E]
  Tensor top = rnn_.forward(e, arena, training, dropout_seed_);  // [T, B, H*D]
  Tensor h = drop_.forward(top, arena, training, mix_seed(dropout_seed_, 0x4ead));
  Tensor logits = head_.forward(h, arena);  // [T, B, V]
  return swap01(logits, arena);
}

void CharLM::backward(const Tensor& dy, Arena& arena) {
  ST_CHECK(dy.shape == Shape({batch_, steps_, spec_.vocab}), "CharLM: dy must be {}, got {}",
           shape_str({batch_, steps_, spec_.vocab}), shape_str(dy.shape));
  Tensor dtop = drop_.backward(head_.backward(swap01(dy, arena), arena), arena);
  Tensor de = rnn_.backward(dtop, arena, true);
  emb_.backward(de, arena);
}

}  // namespace seqtrain
