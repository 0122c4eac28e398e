// runtime.cuda_graphs without a GPU (train/step_graphs.h): TrainStep on CaptureBackend
// (tests/capture_backend.h), which records a captured step's operations with the pointers and
// host scalars of its capture and replays exactly those, as a CUDA graph does. A captured run
// must give every step's loss, the gradient norms, the final weights and AdamW's moments bit for
// bit as the same run uncaptured, with one capture per batch shape and a replay for every later
// step of it; the steps that cannot be captured run uncaptured, said once, with the same results.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/device_buffer.h"
#include "backend/dropout_seed.h"
#include "capture_backend.h"
#include "core/rng.h"
#include "graph_runs.h"

namespace seqtrain::testing {
namespace {

ModelSpec gpt() {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 11;
  s.lookback = s.output_size = 8;
  s.layers = 2;
  s.heads = 2;
  s.hidden = 12;
  return s;
}

ModelSpec mlp() { return graph_mlp(); }

// A run on its own CaptureBackend over the CPU backend.
GraphRun run_on_capture(const GraphSetup& s) {
  auto backend = std::make_shared<CaptureBackend>(backend_named("cpu"));
  GraphRun r = graph_run(*backend, s);
  r.owned = backend;
  return r;
}

const CaptureBackend::Counts& counts(const GraphRun& r) { return static_cast<CaptureBackend&>(*r.owned).counts(); }

// One capture per shape (the full batches' at their third step, the short last batch's in the
// third epoch: two uncaptured steps first), a replay for every later step, and the uncaptured
// run's numbers bit for bit.
void captured_matches_uncaptured(const ModelSpec& spec) {
  GraphRun captured = run_on_capture({.spec = spec}), plain = run_on_capture({.spec = spec, .graphs = false});
  graph_epochs(captured, 3, 4);
  graph_epochs(plain, 3, 4);
  expect_same_run(captured, plain);
  EXPECT_EQ(counts(captured).captures, 2u);
  EXPECT_EQ(counts(captured).aborted, 0u);
  // 12 full batches: two uncaptured, 10 launches; 3 short ones: two uncaptured, 1.
  EXPECT_EQ(counts(captured).replays, 11u);
  EXPECT_EQ(captured.step->graphs()->captures(), 2);
  EXPECT_EQ(captured.step->graphs()->replays(), 11);
  EXPECT_GT(counts(captured).recorded, 10u);
  EXPECT_EQ(*captured.notes, std::vector<std::string>{}) << graph_notes(captured);
  EXPECT_EQ(plain.step->graphs(), nullptr);
  EXPECT_EQ(counts(plain).captures, 0u);
}

TEST(StepGraphs, GptCapturedOncePerShapeReplaysBitwiseLikeUncaptured) { captured_matches_uncaptured(gpt()); }

TEST(StepGraphs, MlpCapturedOncePerShapeReplaysBitwiseLikeUncaptured) { captured_matches_uncaptured(mlp()); }

// Released memory may be what a capture reads: the next step of its shape runs uncaptured and
// the one after captures again.
TEST(StepGraphs, ACaptureIsRedoneAfterMemoryWasReleased) {
  GraphRun captured = run_on_capture({.spec = mlp()}), plain = run_on_capture({.spec = mlp(), .graphs = false});
  for (int64_t s = 0; s < 4; ++s) graph_step(captured, s, 4);
  { DeviceBuffer moved(*captured.owned, 16); }  // allocated and released between steps
  for (int64_t s = 4; s < 8; ++s) graph_step(captured, s, 4);
  for (int64_t s = 0; s < 8; ++s) graph_step(plain, s, 4);
  expect_same_run(captured, plain);
  EXPECT_EQ(counts(captured).captures, 2u);  // steps 2 and 5 (step 4 found its capture stale)
  EXPECT_EQ(counts(captured).replays, 5u);   // 2, 3; 5, 6, 7
}

// Batches of one shape that count different numbers of targets weight their loss gradient by a
// host value: that shape runs uncaptured from then on, said once.
TEST(StepGraphs, ATargetCountThatChangesRunsUncaptured) {
  GraphRun captured = run_on_capture({.spec = gpt()}), plain = run_on_capture({.spec = gpt(), .graphs = false});
  for (GraphRun* r : {&captured, &plain})
    for (int64_t s = 0; s < 6; ++s) graph_step(*r, s, 4, /*ignore_one=*/s == 3);
  expect_same_run(captured, plain);
  EXPECT_EQ(counts(captured).captures, 1u);
  EXPECT_EQ(counts(captured).replays, 1u);  // step 2, its capture
  ASSERT_EQ(captured.notes->size(), 1u);
  EXPECT_CONTAINS((*captured.notes)[0], "count different numbers of targets");
}

// A replay runs no forward on the host, and still refuses a bad token id as forward does.
TEST(StepGraphs, AReplayedStepChecksTokenIds) {
  GraphRun r = run_on_capture({.spec = gpt()});
  for (int64_t s = 0; s < 4; ++s) graph_step(r, s, 4);
  EXPECT_EQ(counts(r).replays, 2u);
  std::vector<float> x(4 * 8, 1.f);
  std::vector<int64_t> y(4 * 8, 1);
  x[9] = 11.f;  // a vocabulary of 11: ids 0..10
  EXPECT_CONTAINS(error_of([&] { r.step->run(Tensor(x.data(), {4, 8}), Tensor(y.data(), {4, 8}, DType::i64), 9); }),
                  "token id 11 at batch 1 position 1 is outside the vocabulary");
  EXPECT_EQ(counts(r).replays, 2u);
}

// fp16's loss scaling decided on the device: an initial scale of 2^127 overflows at once (the
// MLP's targets are large), the scale backs off step by step, and a growth interval of 2 makes it
// climb back into overflow again and again, so steps are skipped while replayed too. A capture
// that kept a scale, a skip or AdamW's t of its own step replays other numbers: every loss, norm,
// weight, moment, scale, the skips and the optimizer's step count must be the uncaptured run's,
// bit for bit. (The CPU emulates fp16 products only in the recurrent layers, which no capture
// records, and the GPT refuses fp16, whose cross-entropy gradients no float scale overflows: the
// MLP here runs fp32 under the fp16 run's scaler.)
void fp16_captured_matches_uncaptured(const ModelSpec& spec) {
  const LossScalerOptions scaling{.init = 0x1p127, .growth_interval = 2};
  GraphRun captured = run_on_capture({.spec = spec, .loss_scale = scaling, .target_scale = 100.f});
  GraphRun plain = run_on_capture({.spec = spec, .graphs = false, .loss_scale = scaling, .target_scale = 100.f});
  graph_epochs(captured, 3, 4);
  graph_epochs(plain, 3, 4);
  expect_same_run(captured, plain);
  EXPECT_EQ(captured.scaler->to_json(), plain.scaler->to_json());
  EXPECT_EQ(captured.opt->param_steps(captured.model->params().size()),
            plain.opt->param_steps(plain.model->params().size()));
  const int64_t skipped = plain.scaler->skipped_total();
  EXPECT_GT(skipped, 3);  // the back-off from 2^127, and the overflows after growth
  EXPECT_EQ(plain.opt->step_count(), 15 - skipped);
  // Skips happened while replayed: the scale went down after some replayed step.
  bool backed_off_late = false;
  for (size_t i = 6; i < captured.scales.size(); ++i) backed_off_late |= captured.scales[i] < captured.scales[i - 1];
  EXPECT_TRUE(backed_off_late);
  EXPECT_EQ(counts(captured).captures, 2u);
  EXPECT_EQ(counts(captured).replays, 11u);
  EXPECT_EQ(*captured.notes, std::vector<std::string>{}) << graph_notes(captured);
}

TEST(StepGraphs, LossScaledMlpOverflowsCapturedReplayBitwiseLikeUncaptured) { fp16_captured_matches_uncaptured(mlp()); }


// What makes every step uncapturable is said once at the start, and the run is the uncaptured one.
void uncaptured_with_reason(const GraphSetup& s, const std::string& reason) {
  GraphSetup off = s;
  off.graphs = false;
  GraphRun captured = run_on_capture(s), plain = run_on_capture(off);
  graph_epochs(captured, 2, 4);
  graph_epochs(plain, 2, 4);
  expect_same_run(captured, plain);
  EXPECT_EQ(counts(captured).captures, 0u);
  EXPECT_EQ(counts(captured).replays, 0u);
  ASSERT_EQ(captured.notes->size(), 1u) << graph_notes(captured);
  EXPECT_CONTAINS((*captured.notes)[0], reason);
}

// A seed in memory takes the salts the layers add and mixes them as an op runs: the host's
// mix_seed chain, from whatever the memory holds then.
TEST(StepGraphs, ASeedInMemoryMixesAsTheHostDoes) {
  uint64_t step = 12345;
  const DropoutSeed in_memory = mix_seed(mix_seed(DropoutSeed::at(&step), 7), 0xe3b);
  EXPECT_EQ(resolve_seed(in_memory), mix_seed(mix_seed(uint64_t{12345}, 7), 0xe3b));
  step = 999;
  EXPECT_EQ(resolve_seed(in_memory), mix_seed(mix_seed(uint64_t{999}, 7), 0xe3b));
  EXPECT_EQ(resolve_seed(mix_seed(DropoutSeed(5), 7)), mix_seed(uint64_t{5}, 7));
}

// Dropout's masks take the step's seed from memory staged with the batch: a capture that kept
// its own step's seed replays its masks every step, and the runs part.
TEST(StepGraphs, MlpWithDropoutCapturedReplaysBitwiseLikeUncaptured) {
  ModelSpec s = mlp();
  s.dropout = 0.2f;
  captured_matches_uncaptured(s);
}

// The GPT's dropouts: embedding, attention (inside the op), residual and MLP, the seeds derived
// two and three levels down from the step's.
TEST(StepGraphs, GptWithDropoutCapturedReplaysBitwiseLikeUncaptured) {
  ModelSpec s = gpt();
  s.dropout = 0.2f;
  captured_matches_uncaptured(s);
}

TEST(StepGraphs, GradientAccumulationRunsUncaptured) {
  uncaptured_with_reason({.spec = mlp(), .grad_accum = 2}, "train.grad_accum > 1");
}

TEST(StepGraphs, SgdRunsUncaptured) {
  uncaptured_with_reason({.spec = mlp(), .optimizer = "sgd"}, "train.optimizer.name sgd");
}

// A capture that fails part-way (here the CPU's recurrent layers, which no capture can record)
// is abandoned, said once, and the step runs uncaptured with the same results.
TEST(StepGraphs, AFailedCaptureFallsBackToTheUncapturedStep) {
  ModelSpec lstm = mlp();
  lstm.type = "lstm";
  GraphRun captured = run_on_capture({.spec = lstm}), plain = run_on_capture({.spec = lstm, .graphs = false});
  graph_epochs(captured, 3, 4);
  graph_epochs(plain, 3, 4);
  expect_same_run(captured, plain);
  EXPECT_EQ(counts(captured).captures, 0u);
  EXPECT_EQ(counts(captured).aborted, 2u);  // the full batches' shape and the short batch's
  ASSERT_EQ(captured.notes->size(), 1u) << graph_notes(captured);
  EXPECT_CONTAINS((*captured.notes)[0], "its capture failed: capture backend: a recurrent layer's forward");
}

// The CPU cannot capture: auto there is the uncaptured step, with nothing said.
TEST(StepGraphs, TheCpuNeverCaptures) {
  GraphRun r = graph_run(backend_named("cpu"), {.spec = mlp()});
  graph_step(r, 0, 4);
  EXPECT_EQ(r.step->graphs(), nullptr);
  EXPECT_TRUE(r.notes->empty());
}

}  // namespace
}  // namespace seqtrain::testing
