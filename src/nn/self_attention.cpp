// SelfAttention forward/backward. See self_attention.h.
//   forward:  qkv = in_proj(x); y = attention(qkv); out = resid_drop(out_proj(y))
//   backward: the same in reverse; the attention op's backward turns dy into dqkv.
// Packed, qkv is scattered to the padded layout before the op and y gathered after it; backward
// gathers dqkv and scatters dy (each the other's gradient).
#include "nn/self_attention.h"
#include "core/trace.h"

#include "backend/backend.h"

namespace seqtrain {
namespace {

// in_proj's output width, 3 * n_embd, once n_head is known to split it (checked before any
// parameter is registered).
int64_t qkv_width(const std::string& prefix, int64_t n_embd, int64_t n_head) {
  ST_CHECK(n_embd > 0 && n_head > 0 && n_embd % n_head == 0,
           "SelfAttention '{}': n_embd {} must be a positive multiple of n_head {} (the qkv width 3 * n_embd "
           "= {} splits into 3 * n_head heads)",
           prefix, n_embd, n_head, 3 * n_embd);
  return 3 * n_embd;
}

// The module's product precision, checked before its Linear layers are built (so a backend
// without bf16 attention is named for that, not for its GEMM).
DType checked_precision(const ParamStore& p, const std::string& prefix, const SelfAttentionOptions& o) {
  ST_CHECK(o.precision == DType::f32 || o.precision == DType::bf16,
           "SelfAttention '{}': attention precision {} is not supported: use f32 or bf16", prefix,
           dtype_name(o.precision));
  p.backend().require(o.precision == DType::bf16 ? BackendOp::attention_bf16 : BackendOp::attention_f32,
                      "(SelfAttention " + prefix + ")");
  return o.precision;
}

}  // namespace

SelfAttention::SelfAttention(ParamStore& p, const std::string& prefix, int64_t n_embd_, const SelfAttentionOptions& o)
    : params(p),
      n_embd(n_embd_),
      options(o),
      in_proj(p, prefix + "." + o.names.qkv_weight, prefix + "." + o.names.qkv_bias, n_embd_,
              qkv_width(prefix, n_embd_, o.n_head), o.bias, checked_precision(p, prefix, o)),
      out_proj(p, prefix + "." + o.names.out, n_embd_, n_embd_, o.bias, o.precision),
      resid_drop(o.resid_dropout, &p.backend()) {
  ST_CHECK(o.attn_dropout >= 0.f && o.attn_dropout <= 1.f, "SelfAttention '{}': attention dropout must be in "
           "[0, 1], got {}", prefix, o.attn_dropout);
}

AttentionArgs SelfAttention::attention_args() const {
  AttentionArgs a;
  a.batch = y.dim(0);
  a.seq = y.dim(1);
  a.heads = options.n_head;
  a.channels = n_embd;
  a.compute = options.precision;
  a.dropout = attn_p;
  a.seed = attn_seed;
  a.batch_offset = PassRows::of(a.batch).first;  // a data-parallel shard's global rows
  a.causal = options.causal;
  a.key_padding_mask = mask;
  a.qkv = qkv.f32();
  a.y = y.f32();
  a.lse = lse.f32();
  return a;
}

void SelfAttention::init(Rng& rng) {
  in_proj.init(rng);
  out_proj.init(rng);
}

Tensor SelfAttention::forward(const Tensor& x, Arena& arena, bool training, DropoutSeed seed,
                              const uint8_t* key_padding_mask, const TokenPacking* token_packing) {
  ST_TRACE("attention.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(x.shape.size() == 3 && x.dim(2) == n_embd && x.contiguous(),
           "SelfAttention: input {} must be a contiguous [B, T, {}] (batch, time, n_embd)", shape_str(x.shape), n_embd);
  ST_CHECK(!token_packing || (key_padding_mask && x.dim(0) == 1 && x.dim(1) == token_packing->rows()),
           "SelfAttention: packed input {} needs the packing's [1, {}, {}] and its key-padding mask",
           shape_str(x.shape), token_packing ? token_packing->rows() : 0, n_embd);
  Backend& be = params.backend();
  packing = token_packing;
  qkv = in_proj.forward(x, arena);
  if (packing) qkv = packing->scatter(be, qkv, arena);
  const int64_t B = qkv.dim(0), T = qkv.dim(1);
  y = arena.tensor({B, T, n_embd});
  lse = arena.tensor({B, options.n_head, T});
  attn_p = training ? options.attn_dropout : 0.f;
  attn_seed = mix_seed(seed, 0);
  mask = key_padding_mask;
  be.attention_forward(attention_args());
  return resid_drop.forward(out_proj.forward(packing ? packing->gather(be, y, arena) : y, arena), arena, training,
                            mix_seed(seed, 1));
}

Tensor SelfAttention::backward(const Tensor& dout, Arena& arena) {
  ST_TRACE("attention.backward", "layer", [&] { return trace::shape_args(dout.shape); });
  ST_CHECK(qkv.ptr != nullptr, "SelfAttention: backward called before forward");
  Backend& be = params.backend();
  Tensor dy = out_proj.backward(resid_drop.backward(dout, arena), arena);
  if (packing) dy = packing->scatter(be, dy, arena);
  Tensor dqkv = arena.tensor(qkv.shape);
  be.attention_backward(attention_args(), dy.f32(), dqkv.f32());
  return in_proj.backward(packing ? packing->gather(be, dqkv, arena) : dqkv, arena);
}

}  // namespace seqtrain
