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

TEST(CudaGraphs, CapturedGptStepsMatchUncapturedBitwise) {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 65;
  s.lookback = s.output_size = 32;
  s.layers = 2;
  s.heads = 4;
  s.hidden = 64;
  s.bias = false;
  expect_captured_like_uncaptured(s);
}

// cuDNN's RNN API inside the capture: a forecaster of two LSTM layers.
TEST(CudaGraphs, CapturedLstmForecasterStepsMatchUncapturedBitwise) {
  ModelSpec s;
  s.type = "lstm";
  s.input_size = 4;
  s.lookback = 24;
  s.hidden = 32;
  s.layers = 2;
  s.output_size = 2;
  expect_captured_like_uncaptured(s);
}

}  // namespace
}  // namespace seqtrain::testing
