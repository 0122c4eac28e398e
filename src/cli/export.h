// `seqtrain export RUN_OR_CHECKPOINT --out DIR [--overwrite]`: a trained model as a directory a
// PyTorch user needs nothing else for:
//   DIR/model.safetensors  the checkpoint's weights file, byte for byte (PyTorch state_dict names)
//   DIR/config.json        {"format": "seqtrain.export", "version", "model_spec" (the resolved spec,
//                          registry's spec_to_json), "torch" (the dict seqtrain_torch.from_spec
//                          builds the mirror module from), "source" (checkpoint, tag, updates)}
//   DIR/vocab.json         text models: the vocabulary the checkpoint was trained with
//   DIR/README.md          how to load it (seqtrain_torch.load_exported(DIR))
// The model comes through load_model, so the checksums are verified and the weights are known to
// fit the spec before anything is written. The directory is filled under a temporary name next to
// DIR and renamed into place: an error at any point leaves no DIR and no temporary behind (and,
// with --overwrite, the previous export whole).
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace seqtrain {

struct ExportArgs {
  std::string checkpoint, out;
  std::string encoder = "";  // --encoder FILE.safetensors: the encoder alone instead of --out's directory
  bool overwrite = false;
};

// What was exported: the checkpoint directory read and the files written into out.
struct ExportResult {
  std::string checkpoint_dir, out;
  std::vector<std::string> files;
};

// Writes the export (see above). Errors name the path and the fix: an existing `out` without
// `overwrite`, an `out` that is not an earlier export (never replaced, even with overwrite), a
// path that is no checkpoint, a checkpoint that fails its checksums, an unwritable directory.
ExportResult export_model(const ExportArgs& args);

// `seqtrain export RUN --encoder FILE.safetensors [--overwrite]`: the encoder's tensors alone
// (models/encoder.h: every tensor outside head., future_head., decoder., mask_token) under their
// PyTorch names, from the run's best checkpoint (checksums verified), with __metadata__ saying what
// the encoder is (format "seqtrain.encoder", family, sizes, pooling: models/encoder.h's
// encoder_metadata; plus model_type, source, tag, updates), written to a temporary file and
// renamed into place. A model without an encoder (mlp, gpt, char LM) is an Error naming the run and
// its model.type, with nothing written; an existing FILE is replaced only with overwrite and only
// when it is an earlier encoder export. model.encoder_from reads the file (train/encoder_from.h),
// python/seqtrain_torch/encoder.py's load_encoder builds the PyTorch module from it.
ExportResult export_encoder(const ExportArgs& args);

// Registers the subcommand's options into `args`; main() calls run_export when it parsed.
CLI::App* add_export_command(CLI::App& app, ExportArgs& args);
int run_export(const ExportArgs& args);

}  // namespace seqtrain
