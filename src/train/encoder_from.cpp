// A model's encoder from a pretraining run or an exported encoder file. See encoder_from.h.
#include "train/encoder_from.h"

#include <filesystem>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/encoder.h"
#include "train/checkpoint.h"
#include "train/init_from.h"
#include "train/load_model.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

// "a, b, c" of up to 20 names, then how many more.
std::string names_of(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 20; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 20) out += fmt::format(" and {} more", names.size() - 20);
  return out.empty() ? "(none)" : out;
}

struct Source {
  SafetensorsFile file;
  std::string what;  // for messages: "'PATH'" or "run 'DIR' (model.type gpt)"
};

// A run or checkpoint directory: its (best) checkpoint's weights, checksum verified; a file: as is.
Source read_source(const std::string& source) {
  Source s;
  if (fs::is_directory(source)) {
    const std::string dir = checkpoint_dir(source);
    s.file = read_safetensors(verified_model_file(dir));  // (an error names a directory that is no checkpoint)
    const std::string type = read_checkpoint_state(dir).value("/model_spec/type"_json_pointer, std::string("?"));
    s.what = fmt::format("'{}' (a {} run, checkpoint {})", source, type, dir);
  } else {
    ST_CHECK(fs::exists(source), "model.encoder_from: '{}' does not exist; give a run directory or the .safetensors "
             "file `seqtrain export RUN --encoder FILE` wrote", source);
    s.file = read_safetensors(source);
    s.what = fmt::format("'{}'", source);
  }
  return s;
}

// The family the source's encoder is: its metadata's (an exported encoder), which its tensors must
// agree with, else its tensors'.
std::string source_family(const Source& s) {
  const std::string from_tensors = encoder_family(weight_shapes(s.file));
  auto fmt_it = s.file.metadata.find("format");
  if (fmt_it == s.file.metadata.end() || fmt_it->second != kEncoderFormat) return from_tensors;
  auto fam = s.file.metadata.find("family");
  const std::string said = fam == s.file.metadata.end() ? "" : fam->second;
  ST_CHECK(said == from_tensors, "model.encoder_from: {} says its encoder is family '{}' but its tensors are {}; the "
           "file is damaged or was edited: export it again with `seqtrain export RUN --encoder`", s.what, said,
           from_tensors.empty() ? "no encoder" : "an encoder of family " + from_tensors);
  return said;
}

}  // namespace

std::string EncoderFromReport::line() const {
  return fmt::format("model.encoder_from: {} {} encoder tensors ({} values) from {}; fresh: {}", filled.size(),
                     family, values, source, names_of(fresh));
}

EncoderFromReport encoder_from(const std::string& source, Model& model) {
  ParamStore& params = model.params();
  const Source s = read_source(source);
  const std::string have = source_family(s);
  std::vector<std::string> source_encoder;
  for (const auto& t : s.file.tensors)
    if (is_encoder_tensor(t.name)) source_encoder.push_back(t.name);
  ST_CHECK(!have.empty() && !source_encoder.empty(),
           "model.encoder_from: {} holds no encoder tensors (an lstm or gru's rnn.*, a transformer's input_proj.* and "
           "encoder.*, a cnn's convs.* and norms.*); its tensors are: {}. Give a run (or an `export --encoder` file) "
           "of an lstm, gru, transformer or cnn model, or a masked pretraining run", s.what, names_of([&] {
             std::vector<std::string> n;
             for (const auto& t : s.file.tensors) n.push_back(t.name);
             return n;
           }()));
  const std::string want = encoder_family(weight_shapes(params));
  ST_CHECK(!want.empty(), "model.encoder_from is set but model.type '{}' has no encoder to start from one: use "
           "model.type lstm, gru, transformer or cnn, or remove model.encoder_from", model.spec().type);
  ST_CHECK(have == want, "model.encoder_from: {} holds an encoder of family {} but this model's is of family {} "
           "(model.type {}); set model.type {} (with the source's sizes) or start from a {} run", s.what, have, want,
           model.spec().type, have, want);

  // Every encoder tensor on each side must meet its twin of the same shape.
  std::vector<std::string> skip;
  for (const auto& e : params.entries()) {
    if (!is_encoder_tensor(e.name)) {
      skip.push_back(e.name);
      continue;
    }
    const NamedTensor* t = s.file.find(e.name);
    ST_CHECK(t, "model.encoder_from: {} has no tensor '{}' for this model's encoder (a different model.layers, "
             "bidirectional, pooling or positions? a cnn: a different model.norm); its encoder tensors are: {}", s.what,
             e.name,
             names_of(source_encoder));
    ST_CHECK(t->shape == e.shape, "model.encoder_from: tensor '{}' of {} has shape {} but this model's has shape {}; "
             "the encoders differ in size: give this model the source's model.hidden, model.layers (cnn: "
             "model.kernel_sizes) and input features", e.name, s.what, shape_str(t->shape), shape_str(e.shape));
  }
  for (const auto& name : source_encoder)
    ST_CHECK(params.find(name), "model.encoder_from: {} has encoder tensor '{}' that this model lacks (a different "
             "model.layers, bidirectional, pooling or positions? a cnn: a different model.norm); set them as the "
             "source was trained", s.what, name);
  for (const auto& t : s.file.tensors)
    if (!is_encoder_tensor(t.name)) skip.push_back(t.name);

  const InitFromReport r = init_from(s.file, params, InitFromOptions{.map = {}, .skip = skip, .strict = true});
  EncoderFromReport out{s.file.path, have, r.filled, {}, 0};
  for (const auto& e : params.entries()) {
    if (is_encoder_tensor(e.name)) out.values += numel_of(e.shape);
    else out.fresh.push_back(e.name);
  }
  return out;
}

}  // namespace seqtrain
