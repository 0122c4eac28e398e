// The encoder rule over tensor names, its family from shapes, its export metadata. See encoder.h.
#include "models/encoder.h"

namespace seqtrain {
namespace {
bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

bool is_encoder_tensor(const std::string& name) {
  return !starts_with(name, "head.") && !starts_with(name, "future_head.") && !starts_with(name, "decoder.") &&
         name != "mask_token";
}

std::string encoder_family(const WeightShapes& w) {
  if (w.count("embed.weight")) return "";  // a char LM: its RNN reads token embeddings, not windows
  if (w.count("input_proj.weight")) return "transformer";
  if (w.count("convs.0.weight")) return "cnn";
  auto hh = w.find("rnn.weight_hh_l0");
  if (hh == w.end() || hh->second.size() != 2 || hh->second[1] <= 0) return "";
  const int64_t gates = hh->second[0] / hh->second[1];
  if (hh->second[0] % hh->second[1] == 0 && gates == 4) return "lstm";
  if (hh->second[0] % hh->second[1] == 0 && gates == 3) return "gru";
  return "";
}

WeightShapes weight_shapes(const ParamStore& params) {
  WeightShapes w;
  for (const auto& e : params.entries()) w[e.name] = e.shape;
  return w;
}

WeightShapes weight_shapes(const SafetensorsFile& file) {
  WeightShapes w;
  for (const auto& t : file.tensors) w[t.name] = t.shape;
  return w;
}

Metadata encoder_metadata(const ModelSpec& s, const std::string& family, int64_t embedding_size) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  Metadata m = {{"format", kEncoderFormat},
                {"version", "1"},
                {"family", family},
                {"input_size", std::to_string(s.input_size)},
                {"lookback", std::to_string(s.lookback)},
                {"hidden", std::to_string(s.hidden)},
                {"layers", std::to_string(s.layers)},
                {"pooling", s.pooling},
                {"embedding_size", std::to_string(embedding_size)}};
  if (family == "transformer") {
    m["heads"] = std::to_string(s.heads);
    m["patch_size"] = std::to_string(s.patch_size);
    m["positions"] = s.positions == "auto" ? "learned" : s.positions;
    m["bias"] = b(s.bias);
  } else if (family == "cnn") {
    std::string k;
    for (size_t i = 0; i < s.kernel_sizes.size(); ++i) k += (i ? "," : "") + std::to_string(s.kernel_sizes[i]);
    m["kernel_sizes"] = k;
    m["norm"] = s.norm;
  } else {
    m["bidirectional"] = b(s.bidirectional);
  }
  return m;
}

}  // namespace seqtrain
