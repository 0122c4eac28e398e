// The GPT through the whole training loop: a run stopped after an epoch and resumed is bit for
// bit the uninterrupted run (random-offset batches, dropout, gradient accumulation, per-block
// gradient checkpointing, validation and checkpoints inside the epoch), the metrics carry
// tokens/s, generate reads the run, and examples/shakespeare_gpt.yaml is a valid config that
// trains (on a small text here: tests never download).
#include <gtest/gtest.h>

#include "cli/generate.h"
#include "config/config.h"
#include "data/text.h"
#include "test_trainer_util.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

std::string verse(int64_t n) {
  std::string s;
  Rng r(11);
  const std::string words[] = {"shall I ", "compare thee ", "to a ", "summer's day\n", "thou art ", "more lovely "};
  while (static_cast<int64_t>(s.size()) < n) s += words[r.below(6)];
  s.resize(static_cast<size_t>(n));
  return s;
}

Config gpt_config(const std::string& path, std::vector<std::string> extra) {
  std::vector<std::string> o = {"data.source=text", "data.path=" + path, "data.block_size=16", "data.stride=16",
                                "data.split=[0.8,0.2,0]", "data.sampling=random", "data.samples_per_epoch=48",
                                "train.loss=cross_entropy", "model.type=gpt", "model.layers=2", "model.heads=2",
                                "model.hidden=16", "model.dropout=0.1", "train.batch_size=8", "train.grad_accum=2",
                                "train.grad_checkpoint=true", "train.eval_every=2u", "train.eval_iters=2",
                                "train.log_every=1", "train.optimizer.decay=2d", "train.optimizer.weight_decay=0.1",
                                "runtime.threads=1", "runtime.deterministic=true", "data.workers=2"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o);
}

TEST(GptTraining, ResumedRunIsBitIdenticalAndGenerateReadsIt) {
  TempDir dir;
  const std::string path = write_file(dir, "verse.txt", verse(4000));
  const std::string a = dir / "a", b = dir / "b";
  train(gpt_config(path, {"train.epochs=2"}), TrainOptions{a, false, false, true});
  train(gpt_config(path, {"train.epochs=1"}), TrainOptions{b, false, false, true});
  train(gpt_config(path, {"train.epochs=2"}), TrainOptions{b, true, false, true});
  EXPECT_EQ(cli::slurp(a + "/checkpoints/last/model.safetensors"), cli::slurp(b + "/checkpoints/last/model.safetensors"));
  const auto metrics = cli::read_metrics(a + "/metrics.jsonl");
  EXPECT_EQ(cli::timeless(metrics), cli::timeless(cli::read_metrics(b + "/metrics.jsonl")));
  int train_records = 0, val_records = 0;
  for (const auto& r : metrics) {
    if (r.value("split", "") == "train" && r.contains("grad_norm")) {
      ++train_records;
      EXPECT_NEAR(r.at("tokens_per_s").get<double>(), 16 * r.at("samples_per_s").get<double>(),
                  1e-6 * r.at("tokens_per_s").get<double>());
    }
    if (r.value("split", "") == "val") ++val_records;
  }
  EXPECT_EQ(train_records, 6) << "48 samples / (8 x 2) = 3 updates an epoch, logged every update";
  EXPECT_GE(val_records, 3) << "eval_every 2u validates inside the epoch";

  LoadedGenerator g = load_generator(a);
  EXPECT_EQ(g.model->spec().type, "gpt");
  GenerateArgs args;
  args.prompt = "shall I";
  args.tokens = 40;  // past the block size of 16: the windowed path too
  args.temperature = 0.8;
  args.seed = 3;
  const std::string text = generate_text(*g.model, g.vocab, args);
  EXPECT_EQ(decode_utf8(text, "generated").size(), 7u + 40u);
  EXPECT_EQ(text, generate_text(*g.model, g.vocab, args)) << "same seed, same text";
}

TEST(GptTraining, TheShakespeareExampleIsAValidConfigThatTrains) {
  TempDir dir;
  const std::string path = write_file(dir, "verse.txt", verse(20000));
  Config c = load_config(source_dir() + "/examples/shakespeare_gpt.yaml",
                         {"data.path=" + path, "train.max_steps=4", "train.log_every=2", "runtime.threads=1",
                          "train.schedule.warmup_steps=2"});
  EXPECT_EQ(c.model.type, "gpt");
  EXPECT_EQ(c.model.layers, 4);
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.model.hidden, 128);
  EXPECT_EQ(c.data.block_size, 64);
  EXPECT_EQ(c.train.batch_size, 12);
  const TrainSummary s = train(c, TrainOptions{dir / "run", false, false, true});
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.stopped_by, "max_steps");
  const auto records = cli::read_metrics(dir / "run/metrics.jsonl");
  int logged = 0;
  for (const auto& r : records)
    if (r.value("split", "") == "train" && r.contains("grad_norm")) {
      EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
      ++logged;
    }
  EXPECT_EQ(logged, 2) << "steps 2 and 4";
}

}  // namespace
}  // namespace seqtrain::testing
