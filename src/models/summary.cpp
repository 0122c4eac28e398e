// The model summary. See summary.h.
#include "models/summary.h"

#include <fmt/format.h>

#include "models/registry.h"

namespace seqtrain {

namespace {
constexpr int64_t B = -1;

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + (s[i] < 0 ? std::string("B") : std::to_string(s[i]));
  return out + "]";
}

std::string cell_name(const ModelSpec& s) { return rnn_cell(s.type) == RnnCell::lstm ? "LSTM" : "GRU"; }

// The layers of an RNN stack over s.lookback steps: "rnn.l<k>", each owning its layer's weights
// (both directions).
void rnn_rows(const ModelSpec& s, int64_t in, std::vector<LayerRow>& rows) {
  const int64_t dirs = s.bidirectional ? 2 : 1;
  for (int64_t k = 0; k < s.layers; ++k) {
    const std::string kind = fmt::format("{}{} {} -> {}{}", s.bidirectional ? "bidirectional " : "", cell_name(s),
                                         k == 0 ? in : dirs * s.hidden, s.hidden, s.bidirectional ? " x 2" : "");
    rows.push_back({fmt::format("rnn.l{}", k), kind, {B, s.lookback, dirs * s.hidden}, "rnn", fmt::format("_l{}", k)});
  }
}

bool owns(const LayerRow& r, const std::string& name) {
  if (!r.prefix.empty() && r.layer.empty() && name == r.prefix) return true;  // a bare tensor: cls_token
  if (r.prefix.empty() || name.rfind(r.prefix + ".", 0) != 0) return false;
  if (r.layer.empty()) return true;
  const size_t at = name.rfind(r.layer);
  return at != std::string::npos && (at + r.layer.size() == name.size() || name[at + r.layer.size()] == '_');
}

std::string thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Masked pretraining's rows after an encoder of `width` channels over `rows` steps or tokens
// (models/reconstruction_head.h), in place of the pooling and the head.
void reconstruction_rows(const ModelSpec& s, int64_t rows_per_sample, int64_t width, std::vector<LayerRow>& rows) {
  if (s.mask_fill == "token")
    rows.insert(rows.begin() + 1, {"mask_token", "learned fill of masked inputs", {B, s.lookback, s.input_size},
                                   "mask_token"});
  rows.push_back({"decoder.norm", "LayerNorm", {B, rows_per_sample, width}, "decoder.norm"});
  rows.push_back({"decoder.fc1", fmt::format("Linear {} -> {}, GELU", width, width), {B, rows_per_sample, width},
                  "decoder.fc1"});
  rows.push_back({"decoder.fc2", fmt::format("Linear {} -> {}", width, s.patch_size * s.input_size),
                  {B, s.lookback, s.input_size}, "decoder.fc2"});
}
}  // namespace

std::vector<LayerRow> rnn_forecaster_layers(const ModelSpec& s) {
  std::vector<LayerRow> rows{{"input", s.future_steps ? fmt::format("window + {} known-future steps", s.future_steps)
                                                     : "window",
                               {B, s.lookback + s.future_steps, s.input_size}}};
  rnn_rows(s, s.input_size, rows);
  const int64_t width = (s.bidirectional ? 2 : 1) * s.hidden;
  if (s.reconstruct) {
    reconstruction_rows(s, s.lookback, width, rows);
    return rows;
  }
  rows.push_back({"last step", s.dropout > 0 ? fmt::format("dropout {}", s.dropout) : "", {B, width}});
  rows.push_back({"head", fmt::format("Linear {} -> {}", width, s.output_size), {B, s.output_size}, "head"});
  if (s.future_steps)
    rows.push_back({"future_head", fmt::format("Linear {} -> {}, no bias, added", s.future_steps * s.input_size,
                                               s.output_size),
                    {B, s.output_size}, "future_head"});
  return rows;
}

std::vector<LayerRow> mlp_layers(const ModelSpec& s) {
  const int64_t flat = (s.lookback + s.future_steps) * s.input_size;
  std::vector<LayerRow> rows{{"input", "window, flattened", {B, flat}}};
  for (int64_t k = 0; k < s.layers; ++k)
    rows.push_back({fmt::format("body.{}", 3 * k), fmt::format("Linear {} -> {}, ReLU", k == 0 ? flat : s.hidden, s.hidden),
                    {B, s.hidden}, fmt::format("body.{}", 3 * k)});
  rows.push_back({"head", fmt::format("Linear {} -> {}", s.hidden, s.output_size), {B, s.output_size}, "head"});
  return rows;
}

std::vector<LayerRow> char_lm_layers(const ModelSpec& s) {
  std::vector<LayerRow> rows{
      {"embed", fmt::format("Embedding {} x {}", s.vocab_size, s.embed_size), {B, s.lookback, s.embed_size}, "embed"}};
  rnn_rows(s, s.embed_size, rows);
  rows.push_back({"head", fmt::format("Linear {} -> {}", s.hidden, s.vocab_size), {B, s.lookback, s.vocab_size}, "head"});
  return rows;
}

std::vector<LayerRow> gpt_layers(const ModelSpec& s) {
  const int64_t T = s.lookback, C = s.hidden;
  std::vector<LayerRow> rows{
      {"transformer.wte", fmt::format("Embedding {} x {} (tokens)", s.vocab_size, C), {B, T, C}, "transformer.wte"},
      {"transformer.wpe", fmt::format("Embedding {} x {} (positions), added", T, C), {B, T, C}, "transformer.wpe"}};
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string name = fmt::format("transformer.h.{}", i);
    rows.push_back({name, fmt::format("block: LayerNorm, causal attention ({} heads), LayerNorm, MLP {} -> {} -> {}",
                                      s.heads, C, 4 * C, C),
                    {B, T, C}, name});
  }
  rows.push_back({"transformer.ln_f", "LayerNorm", {B, T, C}, "transformer.ln_f"});
  rows.push_back({"lm_head", fmt::format("Linear {} -> {}, tied to transformer.wte", C, s.vocab_size), {B, T, s.vocab_size}});
  return rows;
}

std::vector<LayerRow> transformer_layers(const ModelSpec& s) {
  const int64_t P = s.patch_size, C = s.hidden, cls = s.pooling == "cls" ? 1 : 0, N = s.lookback / P + cls;
  std::vector<LayerRow> rows{{"input", "window", {B, s.lookback, s.input_size}},
                             {"input_proj", fmt::format("Linear {} -> {}{}", P * s.input_size, C,
                                                        P > 1 ? fmt::format(" (patches of {} steps)", P) : ""),
                              {B, N - cls, C}, "input_proj"}};
  if (cls) rows.push_back({"cls_token", "learned token, prepended", {B, N, C}, "cls_token"});
  const std::string positions = s.positions == "auto" ? "learned" : s.positions;
  if (positions == "learned")
    rows.push_back({"pos_embed", fmt::format("Embedding {} x {} (positions), added", N, C), {B, N, C}, "pos_embed"});
  if (positions == "sinusoidal") rows.push_back({"positions", "sinusoidal, added", {B, N, C}});
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string name = fmt::format("encoder.layers.{}", i);
    rows.push_back({name,
                    fmt::format("block: LayerNorm, attention ({} heads, key padding), LayerNorm, MLP {} -> {} -> {}",
                                s.heads, C, 4 * C, C),
                    {B, N, C}, name});
  }
  rows.push_back({"encoder.norm", "LayerNorm", {B, N, C}, "encoder.norm"});
  if (s.reconstruct) {
    reconstruction_rows(s, N, C, rows);
    return rows;
  }
  rows.push_back({"pool", cls ? "the cls token's output" : s.pooling + " over the valid tokens", {B, C}});
  rows.push_back({"head", fmt::format("Linear {} -> {}", C, s.output_size), {B, s.output_size}, "head"});
  return rows;
}

std::vector<LayerRow> cnn_layers(const ModelSpec& s) {
  const int64_t T = s.lookback, C = s.hidden;
  std::vector<LayerRow> rows{{"input", "window", {B, T, s.input_size}}};
  for (size_t i = 0; i < s.kernel_sizes.size(); ++i) {
    const std::string conv = fmt::format("convs.{}", i), norm = fmt::format("norms.{}", i);
    rows.push_back({conv, fmt::format("Conv1d {} -> {}, kernel {}, same padding", i == 0 ? s.input_size : C, C,
                                      s.kernel_sizes[i]),
                    {B, T, C}, conv});
    rows.push_back({norm,
                    s.norm == "batch" ? "BatchNorm1d over channels (valid steps), ReLU" : "LayerNorm over channels, ReLU",
                    {B, T, C}, norm});
  }
  if (s.reconstruct) {
    reconstruction_rows(s, T, C, rows);
    return rows;
  }
  rows.push_back({"pool", s.pooling + " over the valid steps", {B, C}});
  rows.push_back({"head", fmt::format("Linear {} -> {}", C, s.output_size), {B, s.output_size}, "head"});
  return rows;
}

std::vector<SummaryRow> summarize(const ModelSpec& spec, const ParamStore& params) {
  const std::vector<LayerRow> layers = family(spec.type).layers(spec);
  std::vector<SummaryRow> rows;
  for (const LayerRow& l : layers) rows.push_back({l.name, l.kind, shape_text(l.output), 0});
  SummaryRow other{"(other)", "parameters no layer above owns", "", 0};
  for (const ParamEntry& e : params.entries()) {
    if (e.buffer) continue;  // running statistics: state, not parameters (torch counts parameters())
    size_t i = 0;
    while (i < layers.size() && !owns(layers[i], e.name)) ++i;
    (i < layers.size() ? rows[i] : other).params += numel_of(e.shape);
  }
  if (other.params > 0) rows.push_back(other);
  return rows;
}

std::vector<std::string> format_summary(const ModelSpec& spec, const ParamStore& params) {
  const std::vector<SummaryRow> rows = summarize(spec, params);
  size_t wn = 5, wk = 4, wo = 12;
  for (const SummaryRow& r : rows) {
    wn = std::max(wn, r.name.size());
    wk = std::max(wk, r.kind.size());
    wo = std::max(wo, r.output.size());
  }
  std::vector<std::string> out{fmt::format("model: {} ({}), backend {}", spec.type, family(spec.type).title, spec.backend),
                               fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:>12}", "layer", wn, "type", wk, "output shape", wo,
                                           "parameters")};
  int64_t total = 0;
  for (const SummaryRow& r : rows) {
    out.push_back(fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:>12}", r.name, wn, r.kind, wk, r.output, wo, thousands(r.params)));
    total += r.params;
  }
  out.push_back(fmt::format("total: {} parameters ({:.1f} KiB as fp32); B is the batch", thousands(total),
                            static_cast<double>(total) * 4 / 1024));
  return out;
}

}  // namespace seqtrain
