// Gpt's TextGenerator: one token at a time with a KV cache, in plain fp32 loops over the same
// parameters as forward() (one position at a time needs no GEMM). Once the context is longer
// than the block size, nanoGPT's generate crops it to the last block_size tokens, and every
// position then sees a different window: the cache cannot be reused, so each token runs the
// batched forward() over its window instead (what nanoGPT computes, with the GEMM kernels).
// See gpt.h.
#include <cmath>

#include "models/gpt.h"
#include "nn/activation.h"
#include "backend/device_batch.h"

namespace seqtrain {

namespace {
struct GptState : GenState {
  std::vector<int64_t> tokens;           // the context (at most the block size)
  std::vector<std::vector<float>> k, v;  // per layer: [tokens.size(), C] while the context grows
  Arena arena;                           // the windowed forward's activations
};

// y = W x (+ b): W [out, in] row-major.
void matvec(const float* W, const float* b, const float* x, float* y, int64_t out, int64_t in) {
  for (int64_t o = 0; o < out; ++o) {
    float s = b ? b[o] : 0.f;
    const float* w = W + o * in;
    for (int64_t i = 0; i < in; ++i) s += w[i] * x[i];
    y[o] = s;
  }
}

// torch.nn.LayerNorm over C, eps 1e-5: one row through the Backend's op, as nn/layer_norm.cpp.
void layer_norm(Backend& be, const float* x, const float* w, const float* b, float* y, int64_t C) {
  float mean = 0, rstd = 0;
  LayerNormArgs a;
  a.rows = 1;
  a.channels = C;
  a.eps = LayerNorm::kEps;
  a.x = x; a.weight = w; a.bias = b; a.mean = &mean; a.rstd = &rstd;
  be.layer_norm_forward(a, y);
}

// The parameters of one model, by nanoGPT name, readable on the host (the store's own memory on
// a host-accessible backend, else one download per token); biases null when the model has none.
// `ops` runs the elementwise ops on host vectors: the model's backend where its memory is the
// host's, so generation computes GELU exactly as forward() does, else the CPU backend.
struct Weights {
  const ParamStore& ps;
  HostReadView host = ps.read_view();
  Backend& ops = ps.host_accessible() ? ps.backend() : default_backend();
  const float* operator()(const std::string& name) const {
    const ParamEntry* e = ps.find(name);
    return e ? host.data() + e->offset : nullptr;
  }
};

// Causal attention of the newest position (q) over the cache's k and v [n, C], per head.
void attend(const float* q, const std::vector<float>& k, const std::vector<float>& v, int64_t n, int64_t C, int64_t H,
            float* y) {
  const int64_t D = C / H;
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  std::vector<float> p(n);
  for (int64_t h = 0; h < H; ++h) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t d = 0; d < D; ++d) s += q[h * D + d] * k[j * C + h * D + d];
      p[j] = s * scale;
      mx = std::max(mx, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += p[j] * v[j * C + h * D + d];
      y[h * D + d] = static_cast<float>(acc / sum);
    }
  }
}

// One block on the newest position: x [C] is updated in place; the cache of layer l grows by one.
void block_step(const Weights& W, const std::string& pre, GptState& s, size_t l, float* x, int64_t C, int64_t H) {
  std::vector<float> a(C), qkv(3 * C), y(C), out(C), h(4 * C);
  layer_norm(W.ps.backend(), x, W(pre + "ln_1.weight"), W(pre + "ln_1.bias"), a.data(), C);
  matvec(W(pre + "attn.c_attn.weight"), W(pre + "attn.c_attn.bias"), a.data(), qkv.data(), 3 * C, C);
  s.k[l].insert(s.k[l].end(), qkv.begin() + C, qkv.begin() + 2 * C);
  s.v[l].insert(s.v[l].end(), qkv.begin() + 2 * C, qkv.end());
  attend(qkv.data(), s.k[l], s.v[l], static_cast<int64_t>(s.k[l].size()) / C, C, H, y.data());
  matvec(W(pre + "attn.c_proj.weight"), W(pre + "attn.c_proj.bias"), y.data(), out.data(), C, C);
  for (int64_t c = 0; c < C; ++c) x[c] += out[c];
  layer_norm(W.ps.backend(), x, W(pre + "ln_2.weight"), W(pre + "ln_2.bias"), a.data(), C);
  matvec(W(pre + "mlp.c_fc.weight"), W(pre + "mlp.c_fc.bias"), a.data(), h.data(), 4 * C, C);
  W.ops.activation_forward(ActKind::gelu, h.data(), h.data(), 4 * C);
  matvec(W(pre + "mlp.c_proj.weight"), W(pre + "mlp.c_proj.bias"), h.data(), out.data(), C, 4 * C);
  for (int64_t c = 0; c < C; ++c) x[c] += out[c];
}
}  // namespace

std::unique_ptr<GenState> Gpt::begin() const {
  auto s = std::make_unique<GptState>();
  s->k.resize(blocks_.size());
  s->v.resize(blocks_.size());
  return s;
}

void Gpt::next_logits(GenState& state, int64_t token, float* logits) {
  auto* s = dynamic_cast<GptState*>(&state);
  ST_CHECK(s != nullptr, "gpt: the generation state was not made by this model's begin()");
  const int64_t C = spec_.hidden, V = spec_.vocab_size;
  ST_CHECK(token >= 0 && token < V, "gpt: token id {} is outside the vocabulary of {} ids", token, V);
  if (static_cast<int64_t>(s->tokens.size()) == spec_.lookback) {
    // Cropped: the newest block_size tokens through the batched forward, the last row's logits.
    s->k.assign(s->k.size(), {});
    s->v.assign(s->v.size(), {});
    s->tokens.erase(s->tokens.begin());
    s->tokens.push_back(token);
    Backend& backend = params_.backend();
    s->arena.set_backend(backend);  // the forward's activations: the model's memory (the same one each call)
    s->arena.reset();
    StepContext ctx(s->arena);
    const int64_t T = spec_.lookback;
    const Batch batch = device_batch(batch_of(Tensor(s->tokens.data(), {1, T}, DType::i64)), s->arena, backend);
    Tensor out = forward(batch, ctx);
    read_floats(backend, out.reshape({T, V}).slice0(T - 1, T), logits);
    return;
  }
  const Weights W{params_};
  const int64_t pos = static_cast<int64_t>(s->tokens.size());
  std::vector<float> x(C), y(C);
  const float* te = W("transformer.wte.weight") + token * C;
  const float* pe = W("transformer.wpe.weight") + pos * C;
  for (int64_t c = 0; c < C; ++c) x[c] = te[c] + pe[c];
  for (size_t l = 0; l < blocks_.size(); ++l)
    block_step(W, "transformer.h." + std::to_string(l) + ".", *s, l, x.data(), C, spec_.heads);
  s->tokens.push_back(token);
  layer_norm(W.ps.backend(), x.data(), W("transformer.ln_f.weight"), W("transformer.ln_f.bias"), y.data(), C);
  matvec(W("transformer.wte.weight"), nullptr, y.data(), logits, V, C);
}

}  // namespace seqtrain
