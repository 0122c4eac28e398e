// runtime.cuda_graphs on the GPU (train/step_graphs.h, backend/cuda/cuda_capture.cpp): training
// steps captured as CUDA graphs and replayed, against the same steps uncaptured on the same GPU:
// every step's loss, the gradient norms, the weights and AdamW's moments bit for bit (the same
// kernels read the same values; only the launches differ), one capture per batch shape and a
// replay for every later step. Skips without a GPU (tests/test_step_graphs.cpp proves the logic
// on the CPU through a recording backend).
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "graph_runs.h"

namespace seqtrain::testing {
namespace {

// Three epochs of 4 batches of 16 rows and a short last batch of 15: each shape captured at its
// third step (two run uncaptured first) and replayed after: 10 + 1 launches.
void expect_captured_like_uncaptured(const ModelSpec& spec) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  GraphRun captured = graph_run(gpu, {.spec = spec}), plain = graph_run(gpu, {.spec = spec, .graphs = false});
  graph_epochs(captured, 3, 16);
  graph_epochs(plain, 3, 16);
  ASSERT_NE(captured.step->graphs(), nullptr) << graph_notes(captured);
  EXPECT_EQ(captured.step->graphs()->captures(), 2) << graph_notes(captured);
  EXPECT_EQ(captured.step->graphs()->replays(), 11) << graph_notes(captured);
  expect_same_run(captured, plain);
}

// A char GPT of nanoGPT's shape, scaled down.
ModelSpec gpt() {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 65;
  s.lookback = s.output_size = 32;
  s.layers = 2;
  s.heads = 4;
  s.hidden = 64;
  return s;
}

TEST(CudaGraphs, CapturedGptStepsMatchUncapturedBitwise) {
  ModelSpec s = gpt();
  s.bias = false;
  expect_captured_like_uncaptured(s);
}

// cuDNN's RNN API inside the capture: a forecaster of two LSTM layers.
TEST(CudaGraphs, CapturedLstmForecasterStepsMatchUncapturedBitwise) { expect_captured_like_uncaptured(graph_lstm()); }

// Dropout inside the capture: every layer's masks take the step's seed from device memory staged
// with the batch (backend/dropout_seed.h), so replays draw new masks as the uncaptured steps do.
TEST(CudaGraphs, CapturedGptWithDropoutMatchesUncapturedBitwise) {
  ModelSpec s = gpt();
  s.dropout = 0.2f;
  expect_captured_like_uncaptured(s);
}

// fp16's loss scaling decided on the GPU inside the capture (unscale and the overflow flag, the
// scale's update, AdamW skipping and taking its t from the device's skip count): an initial
// scale of 2^127 overflows at once and a growth interval of 2 climbs back into overflow, so
// replayed steps skip too; scales, skips and step counts must be the uncaptured run's.
TEST(CudaGraphs, LossScaledStepsSkipInsideTheCaptureLikeUncaptured) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const ModelSpec s = graph_mlp();
  const LossScalerOptions scaling{.init = 0x1p127, .growth_interval = 2};
  GraphRun captured = graph_run(gpu, {.spec = s, .loss_scale = scaling, .target_scale = 100.f});
  GraphRun plain = graph_run(gpu, {.spec = s, .graphs = false, .loss_scale = scaling, .target_scale = 100.f});
  graph_epochs(captured, 3, 4);
  graph_epochs(plain, 3, 4);
  expect_same_run(captured, plain);
  EXPECT_EQ(captured.scaler->to_json(), plain.scaler->to_json());
  EXPECT_GT(plain.scaler->skipped_total(), 3);
  EXPECT_EQ(plain.opt->step_count(), 15 - plain.scaler->skipped_total());
  ASSERT_NE(captured.step->graphs(), nullptr) << graph_notes(captured);
  EXPECT_EQ(captured.step->graphs()->captures(), 2) << graph_notes(captured);
  EXPECT_EQ(captured.step->graphs()->replays(), 11) << graph_notes(captured);
}

// The batch's copy lane (backend/batch_landing.h): a forecaster fed by a loader whose page-locked
// slots the second stream copies from directly while the previous step computes, two workers
// refilling each slot once its copy has run, the loss read every 5 steps only (so the host runs
// ahead and the copies overlap). Every loss and norm, the weights and AdamW's moments must be
// those of the same run with each batch copied on the compute stream, captured and not: a batch
// read before its copy landed, a landing buffer overwritten while a step read it, or a slot
// refilled under its copy would train on other numbers.
TEST(CudaGraphs, CopyLaneStepsMatchOneStreamBitwise) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const ModelSpec s = graph_lstm();
  const NoiseSource source(16 * 64 + 63, 24 * 4, 2);  // 16 batches of 64 and one of 63
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "captured" : "uncaptured");
    GraphRun lane = graph_run(gpu, {.spec = s, .graphs = graphs});
    GraphRun one = graph_run(gpu, {.spec = s, .graphs = graphs, .copy_lane = false});
    loader_epochs(lane, source, 3, 64, 2, 5);
    loader_epochs(one, source, 3, 64, 2, 5);
    if (graphs) {
      EXPECT_GT(lane.step->graphs()->replays(), 0) << graph_notes(lane);
    }
    expect_same_run(lane, one);
  }
}

}  // namespace
}  // namespace seqtrain::testing
