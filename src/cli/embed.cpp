// `seqtrain embed`: pooled encoder outputs of an X .npy. See embed.h.
#include "cli/embed.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "backend/device_batch.h"
#include "cli/inputs.h"
#include "data/npy.h"
#include "data/zscore_source.h"
#include "io/atomic_dir.h"
#include "train/load_model.h"
#include "train/trainer.h"

namespace seqtrain {

CLI::App* add_embed_command(CLI::App& app, EmbedArgs& a) {
  auto* e = app.add_subcommand("embed",
                               "Write each sample's pooled encoder output (what the head reads) as a float32 "
                               "[N, C] .npy");
  e->add_option("checkpoint", a.checkpoint, "checkpoints/<tag> directory or run directory (its best)")->required();
  e->add_option("--input", a.input, "X .npy [N, T, F] like the run's data.npy.train_x")->required();
  e->add_option("--lengths", a.lengths, "each sample's valid steps [N] (runs trained with data.npy.train_len)");
  e->add_option("--output", a.output, "the .npy to write")->required();
  return e;
}

int run_embed(const EmbedArgs& a) {
  ST_CHECK(ends_with_text(a.output, ".npy"), "--output {}: embeddings are written as a .npy array; give a path "
           "ending in .npy", a.output);
  const LoadedModel m = load_model(a.checkpoint);
  Model& model = *m.model;
  const int64_t C = model.embedding_size();
  ST_CHECK(C > 0, "embed: run '{}' holds a model.type {} model, which has no encoder to embed with (lstm, gru and "
           "transformer models and their masked pretraining have one)", a.checkpoint, m.spec.type);
  const CheckpointRef ck = open_checkpoint(m.dir);
  ST_CHECK(is_arrays(ck.config.data) && ck.state.contains("io"),
           "embed reads samples as an X .npy, but run '{}' was trained on data.source '{}'{}: embed an npy run",
           a.checkpoint, ck.config.data.source, is_arrays(ck.config.data) ? " without an \"io\" section in "
           "state.json (train it again with this seqtrain)" : "");
  check_input_format(a.input, ".npy", "an X .npy array [N, T, F] like data.npy.train_x");
  const nlohmann::json& io = ck.state.at("io");
  const int64_t steps = io.at("steps"), features = io.at("features");
  auto x = std::make_shared<NpySource>(NpySource::open(a.input));
  ST_CHECK(x->steps() == steps && x->features() == features,
           "--input {}: samples of {} steps x {} features, but the run was trained on {} x {} (X of shape [N, {}, {}])",
           a.input, x->steps(), x->features(), steps, features, steps, features);
  const int64_t N = x->size();
  attach_lengths(*x, ck.config, a.lengths, a.input);
  ZscoreSource input(x, Normalizer::from_json(ck.state.at("normalizer")), features);
  std::vector<float> out(static_cast<size_t>(N * C));
  forward_batches(
      model, input, sample_layout(steps, features, false, false, 0), ck.config.train.batch_size,
      [&](int64_t first, const Batch& host, const Batch&, const Tensor& e, Arena&) {
        ST_CHECK(e.numel() == host.count * C, "embed: the model gave {} values for {} samples of {}", e.numel(),
                 host.count, C);
        read_floats(model.params().backend(), e, out.data() + first * C);
      },
      [&](const Batch& batch, StepContext& ctx) { return model.embed(batch, ctx); });
  write_file_atomic(a.output, npy_bytes_f32({N, C}, out.data(), a.output));
  std::printf("wrote %ld embeddings of %ld values to %s\n", (long)N, (long)C, a.output.c_str());
  return 0;
}

}  // namespace seqtrain
