// `seqtrain export`: a checkpoint as a self-contained directory for PyTorch. See export.h.
#include "cli/export.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/inputs.h"
#include "data/text.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"
#include "models/encoder.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/load_model.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
// The ModelSpec fields that choose how seqtrain computes (kernels, device, training policy), not
// what the module is: left out of "torch", so a new architecture field reaches from_spec without
// touching this list. (The precision is no ModelSpec field: it is the run's policy.)
const char* kComputeOnlyFields[] = {"rnn_impl", "grad_checkpoint", "autotune", "decay", "backend"};

nlohmann::json torch_kwargs(const ModelSpec& spec) {
  nlohmann::json j = spec_to_json(spec);
  for (const char* k : kComputeOnlyFields) j.erase(k);
  return j;
}

// An earlier export (or an empty directory) may be replaced with --overwrite; anything else is
// someone's data, never deleted by a typo in --out.
bool replaceable(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)) return true;
  std::ifstream f(dir / "config.json");
  if (!f) return false;
  return is_export_config(nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false));
}

// --out as an absolute path without a trailing slash (its parent is where the temporary goes).
fs::path export_target(const ExportArgs& a) {
  ST_CHECK(!a.out.empty(), "export needs --out DIR: the directory to write the model into");
  fs::path out = fs::absolute(a.out).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();
  std::error_code ec;
  if (!fs::exists(out, ec)) return out;
  ST_CHECK(a.overwrite, "'{}' already exists; pass --overwrite to replace it, or choose another --out",
           out.string());
  ST_CHECK(replaceable(out),
           "'{}' exists and is not a seqtrain export (no config.json with \"format\": \"seqtrain.export\"), so "
           "--overwrite will not replace it; choose another --out",
           out.string());
  return out;
}

// Writes `text` to `path` and flushes it to disk (publish_dir fsyncs only the directory).
void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  ST_CHECK(f.good(), "writing '{}' failed (disk full?)", path.string());
  fsync_path(path.string());
}

// The weights file as the checkpoint has it, byte for byte. load_model verified the original;
// the copy is verified against the same checksum, so what lands in DIR is what trained.
void copy_weights(const LoadedModel& m, const fs::path& to) {
  const fs::path from = fs::path(m.dir) / "model.safetensors";
  std::error_code ec;
  fs::copy_file(from, to, ec);
  ST_CHECK(!ec, "cannot copy '{}' to '{}': {}", from.string(), to.string(), ec.message());
  const std::string want = m.state.value("/checksums/model.safetensors"_json_pointer, std::string());
  ST_CHECK(file_checksum(to.string()) == want, "'{}' changed while it was exported (its checksum no longer matches "
           "{}/state.json); export again", from.string(), m.dir);
  fsync_path(to.string());
}

// The vocabulary text of a text model: vocab.json beside the weights when the checkpoint has one,
// else state.json's "vocab"; checked to parse and to match the model's vocabulary size.
std::optional<std::string> vocab_text(const LoadedModel& m) {
  const fs::path file = fs::path(m.dir) / "vocab.json";
  const bool in_state = m.state.contains("vocab") && !m.state.at("vocab").is_null();
  if (!fs::exists(file) && !in_state) return std::nullopt;
  std::string text;
  if (fs::exists(file)) {
    std::ifstream f(file, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(f), {});
  } else {
    text = m.state.at("vocab").dump(2) + "\n";
  }
  const std::string where = fs::exists(file) ? file.string() : m.dir + "/state.json: vocab";
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const Vocab v = Vocab::from_json(j, where);
  ST_CHECK(m.spec.vocab_size <= 0 || v.size() == m.spec.vocab_size,
           "{} has {} tokens but the model's vocab_size is {}: the vocabulary belongs to another model", where,
           v.size(), m.spec.vocab_size);
  return text;
}

nlohmann::json export_config(const LoadedModel& m) {
  nlohmann::json c = {{"format", "seqtrain.export"},
                      {"version", 1},
                      {"model_spec", spec_to_json(m.spec)},
                      {"torch", torch_kwargs(m.spec)},
                      {"precision", m.precision},  // the run's runtime.precision, which generate runs it in
                      // What `seqtrain generate` (load_model) verifies the weights against.
                      {"checksums", {{"model.safetensors", m.state.value("/checksums/model.safetensors"_json_pointer, std::string())}}},
                      {"source",
                       {{"checkpoint", fs::absolute(m.dir).lexically_normal().string()},
                        {"tag", m.state.value("tag", std::string())},
                        {"updates", m.state.value("updates", int64_t{0})},
                        {"epoch", m.state.value("epoch", int64_t{0})}}}};
  // Forecasters read and write z-scored values: a PyTorch user needs the statistics too. Text
  // runs store an empty "none" normalizer, which would only be noise here.
  const nlohmann::json norm = m.state.value("normalizer", nlohmann::json());
  if (norm.is_object() && norm.value("method", std::string("none")) != "none") {
    c["data"]["normalizer"] = norm;
    for (const char* k : {"features", "targets"})
      if (m.state.contains(k)) c["data"][k] = m.state.at(k);
  }
  return c;
}

std::string readme_text(const LoadedModel& m, bool has_vocab) {
  const ModelFamily& f = family(m.spec.type);
  const std::string io = f.is_language_model
                             ? "token ids [batch, T] (int64, ids from vocab.json) -> logits [batch, T, vocab_size], "
                               "the first element of the tuple the module returns"
                             : "windows [batch, lookback, input_size] (float32, scaled with config.json's "
                               "data.normalizer as in training) -> [batch, output_size], in the same scale";
  return fmt::format(
      "# {} ({}), exported by `seqtrain export`\n\n"
      "From checkpoint `{}`.\n\n"
      "- `model.safetensors`: the weights, named like the PyTorch module's state_dict\n"
      "- `config.json`: `model_spec` (seqtrain's resolved model), `torch` (what\n"
      "  `seqtrain_torch.from_spec` builds the module from), `source` (the checkpoint) and, for\n"
      "  forecasters, `data` (the normalization statistics of inputs and outputs)\n"
      "{}\n"
      "## Load it in PyTorch\n\n"
      "With seqtrain's `python/` directory on `PYTHONPATH`:\n\n"
      "    import seqtrain_torch\n"
      "    model = seqtrain_torch.load_exported(\"THIS_DIR\")  # eval mode, weights loaded strictly\n\n"
      "or by hand:\n\n"
      "    import json, seqtrain_torch\n"
      "    cfg = json.load(open(\"THIS_DIR/config.json\"))\n"
      "    model = seqtrain_torch.from_spec(cfg[\"torch\"])\n"
      "    seqtrain_torch.load_seqtrain(\"THIS_DIR/model.safetensors\", model)\n\n"
      "Input and output: {}.\n",
      m.spec.type, f.title, fs::absolute(m.dir).lexically_normal().string(),
      has_vocab ? "- `vocab.json`: the vocabulary (ids <-> characters), as seqtrain saves it\n" : "", io);
}

// A fresh temporary directory next to `out` (same filesystem, so the final rename is atomic);
// hidden and named with the pid so a crash leaves something recognisable.
fs::path make_tmp(const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  ST_CHECK(!ec, "cannot create '{}' for --out: {}", out.parent_path().string(), ec.message());
  const fs::path tmp = out.parent_path() / (".tmp-export-" + out.filename().string() + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  ST_CHECK(!ec, "cannot write into '{}' for --out {}: {} (is the directory writable?)", out.parent_path().string(),
           out.string(), ec.message());
  return tmp;
}

void fill(const LoadedModel& m, const fs::path& tmp, ExportResult& r) {
  copy_weights(m, tmp / "model.safetensors");
  write_text(tmp / "config.json", export_config(m).dump(2) + "\n");
  const std::optional<std::string> vocab = vocab_text(m);
  if (vocab) write_text(tmp / "vocab.json", *vocab);
  write_text(tmp / "README.md", readme_text(m, vocab.has_value()));
  r.files = {"model.safetensors", "config.json"};
  if (vocab) r.files.push_back("vocab.json");
  r.files.push_back("README.md");
}
}  // namespace

ExportResult export_model(const ExportArgs& a) {
  const fs::path out = export_target(a);
  // Everything that can fail on the input happens before anything is created.
  const LoadedModel m = load_model(a.checkpoint);
  ST_CHECK(m.spec_from != "export", "'{}' is already an export: copy the directory instead of exporting it again",
           a.checkpoint);
  ExportResult r{m.dir, out.string(), {}};
  const bool existed = fs::exists(out);
  const fs::path tmp = make_tmp(out);
  const fs::path old = out.parent_path() / (".old-" + out.filename().string());  // publish_dir's
  try {
    fill(m, tmp, r);
    publish_dir(tmp.string(), out.string());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    // publish_dir moved the previous export aside but could not rename the new one in.
    if (existed && !fs::exists(out, ec) && fs::exists(old, ec)) fs::rename(old, out, ec);
    throw;
  }
  return r;
}

namespace {
// --encoder as an absolute path; an existing file is replaced only with --overwrite and only when
// it is an earlier encoder export (its metadata says so).
fs::path encoder_target(const ExportArgs& a) {
  ST_CHECK(ends_with_text(a.encoder, ".safetensors"),
           "--encoder {}: the encoder is written as a .safetensors file; give a path ending in .safetensors", a.encoder);
  const fs::path out = fs::absolute(a.encoder).lexically_normal();
  std::error_code ec;
  if (!fs::exists(out, ec)) return out;
  ST_CHECK(a.overwrite, "'{}' already exists; pass --overwrite to replace it, or choose another --encoder",
           out.string());
  bool earlier = false;
  try {
    const Metadata md = read_safetensors(out.string()).metadata;
    earlier = md.count("format") && md.at("format") == kEncoderFormat;
  } catch (const Error&) {
  }
  ST_CHECK(earlier, "'{}' exists and is not an encoder seqtrain exported (no __metadata__ format \"{}\"), so "
           "--overwrite will not replace it; choose another --encoder", out.string(), kEncoderFormat);
  return out;
}
}  // namespace

ExportResult export_encoder(const ExportArgs& a) {
  const fs::path out = encoder_target(a);
  const LoadedModel m = load_model(a.checkpoint);
  ST_CHECK(m.spec_from != "export", "'{}' is an export directory: export the encoder from the run it came from ({})",
           a.checkpoint, m.state.is_object() ? m.dir : std::string("see its config.json \"source\""));
  const std::string kind = encoder_family(weight_shapes(m.model->params()));
  ST_CHECK(m.model->embedding_size() > 0 && !kind.empty(),
           "export --encoder: run '{}' holds a model.type {} model ({}), which has no encoder (lstm, gru and "
           "transformer models and their masked pretraining have one); export the whole model with --out DIR instead",
           a.checkpoint, m.spec.type, family(m.spec.type).title);
  // The checkpoint's own bytes, verified again (load_model verified what it loaded; this is a read).
  SafetensorsFile all = read_safetensors(verified_model_file(m.dir));
  std::vector<NamedTensor> encoder;
  for (auto& t : all.tensors)
    if (is_encoder_tensor(t.name)) encoder.push_back(std::move(t));
  Metadata md = encoder_metadata(m.spec, kind, m.model->embedding_size());
  md["model_type"] = m.spec.type;
  md["source"] = fs::absolute(m.dir).lexically_normal().string();
  md["tag"] = m.state.value("tag", std::string());
  md["updates"] = std::to_string(m.state.value("updates", int64_t{0}));
  std::error_code ec;  // as --out does: the file's directory is made when missing
  if (!out.parent_path().empty()) fs::create_directories(out.parent_path(), ec);
  write_safetensors(out.string(), encoder, md);  // a temporary file renamed into place
  return ExportResult{m.dir, out.string(), {out.filename().string()}};
}

CLI::App* add_export_command(CLI::App& app, ExportArgs& a) {
  auto* e = app.add_subcommand("export",
                               "Write a trained model as a directory PyTorch loads: model.safetensors, config.json, "
                               "vocab.json (text models), README.md");
  e->add_option("checkpoint", a.checkpoint, "checkpoints/<tag> directory or run directory (its best)")->required();
  auto* out = e->add_option("--out", a.out, "directory to create (written under a temporary name, then renamed)");
  auto* enc = e->add_option("--encoder", a.encoder,
                            "write only the encoder's tensors (PyTorch names, what it is in __metadata__) to this "
                            ".safetensors file, for model.encoder_from or seqtrain_torch.load_encoder");
  out->excludes(enc);
  e->add_flag("--overwrite", a.overwrite, "Replace --out (or --encoder) when it holds an earlier export");
  return e;
}

int run_export(const ExportArgs& a) {
  ST_CHECK(!a.out.empty() || !a.encoder.empty(), "export needs --out DIR (the whole model) or --encoder "
           "FILE.safetensors (its encoder alone)");
  const ExportResult r = a.encoder.empty() ? export_model(a) : export_encoder(a);
  std::string files;
  for (const auto& f : r.files) files += (files.empty() ? "" : ", ") + f;
  std::printf("exported: %s\nfrom: %s\nfiles: %s\n", r.out.c_str(), r.checkpoint_dir.c_str(), files.c_str());
  return 0;
}

}  // namespace seqtrain
