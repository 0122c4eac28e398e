// `seqtrain embed RUN --input X.npy [--lengths L.npy] --output E.npy`: each sample's pooled encoder
// output (Model::embed: what the head reads, eval mode) as a float32 [N, C] .npy, for clustering,
// nearest neighbours or a model outside seqtrain. The samples are read as predict reads an npy
// run's: X [N, T, F] of the run's T and F, z-scored with state.json's statistics, lengths from
// --lengths (runs trained with data.npy.*_len) or the run's data.npy.pad_value. A run whose model
// has no encoder (mlp, gpt, char LM) is refused naming the run and its model.type; nothing is
// written unless every sample embedded (the file is renamed into place).
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace seqtrain {

struct EmbedArgs {
  std::string checkpoint, input, lengths, output;
};

CLI::App* add_embed_command(CLI::App& app, EmbedArgs& args);
int run_embed(const EmbedArgs& args);

}  // namespace seqtrain
