// The memory seam (backend.h's allocate/release/copies, backend/device_buffer.h, nn/params.h's
// host-access contract): alignment and ownership of backend allocations, clear errors for bad
// sizes and wrong-backend frees, and whole training runs on GuardedBackend (tests/
// guarded_backend.h), whose memory host code cannot touch: it must train, checkpoint and
// resume bit for bit like the reference backend it wraps, with no copy in the training step.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device_buffer.h"
#include "backend/reference/reference_backend.h"
#include "guarded_backend.h"
#include "io/safetensors.h"
#include "models/char_lm.h"
#include "models/model.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

CpuBackend& cpu() { return static_cast<CpuBackend&>(backend_named("cpu")); }
ReferenceBackend& ref() { return static_cast<ReferenceBackend&>(backend_named("reference")); }

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(DeviceMemory, CpuAllocationsAreLineAlignedAndPageAlignedWhenLarge) {
  for (size_t bytes : {size_t{4}, size_t{100}, size_t{4096 + 4}, size_t{1} << 16}) {
    void* p = cpu().allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    cpu().release(p);
  }
  void* big = cpu().allocate(size_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 4096, 0u);
  cpu().release(big);
  void* r = ref().allocate(12);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % kDeviceAlignment, 0u);
  ref().release(r);
  EXPECT_EQ(cpu().allocate(0), nullptr);
}

TEST(DeviceMemory, ReleaseByTheWrongBackendOrTwiceIsAnError) {
  const size_t live = cpu().allocations().live_count();
  void* p = cpu().allocate(256);
  EXPECT_EQ(cpu().allocations().live_count(), live + 1);
  EXPECT_CONTAINS(error_of([&] { ref().release(p); }), "the reference backend was asked to release buffer");
  cpu().release(p);  // the right one still can
  EXPECT_EQ(cpu().allocations().live_count(), live);
  EXPECT_CONTAINS(error_of([&] { cpu().release(p); }), "which it did not allocate (or released already)");
  int on_stack = 0;
  EXPECT_CONTAINS(error_of([&] { cpu().release(&on_stack); }), "did not allocate");
}

TEST(DeviceMemory, CopiesOutsideALiveBufferAreErrors) {
  for (Backend* b : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&ref())}) {
    auto* p = static_cast<float*>(b->allocate(8 * sizeof(float)));
    std::vector<float> host(16, 1.f);
    b->copy_from_host(host.data(), p, 8 * sizeof(float));
    b->copy_to_host(p + 4, host.data(), 4 * sizeof(float));
    EXPECT_CONTAINS(error_of([&] { b->copy_to_host(p + 4, host.data(), 5 * sizeof(float)); }),
                    "copy_to_host on the " + std::string(b->name()) + " backend: 20 bytes");
    EXPECT_CONTAINS(error_of([&] { b->copy_from_host(host.data(), host.data(), 4); }), "not inside one of its live");
    b->release(p);
    EXPECT_CONTAINS(error_of([&] { b->copy_to_host(p, host.data(), 4); }), "a released buffer");
  }
}

TEST(DeviceMemory, DeviceBufferGoesBackToItsOwnBackendAndChecksSizes) {
  GuardedBackend g(ref());
  {
    DeviceBuffer a(g, 10);
    DeviceBuffer b = std::move(a);  // ownership moves; one release in the end
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(b.backend(), &g);
    std::vector<float> v(10, 2.f), back(10);
    b.upload(v);
    b.download(back);
    EXPECT_EQ(back, v);
    std::vector<float> eleven(11);
    EXPECT_CONTAINS(error_of([&] { b.upload(eleven); }), "upload of 11 floats at element 0 does not fit a device "
                                                          "buffer of 10 floats (on the guarded backend)");
    EXPECT_CONTAINS(error_of([&] { b.download(std::span<float>(back.data(), 2), 9); }), "download of 2 floats");
    EXPECT_EQ(g.live_buffers(), 1u);
  }
  EXPECT_EQ(g.counts().allocations, 1u);
  EXPECT_EQ(g.counts().releases, 1u);
  EXPECT_EQ(g.live_buffers(), 0u);
}

// The guard is real: host code that touches guarded memory outside the seam dies, so the
// training tests below would fail (crash) if any host path bypassed it.
TEST(DeviceMemoryDeathTest, HostAccessToGuardedMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  GuardedBackend g(ref());
  DeviceBuffer b(g, 4);
  EXPECT_DEATH({ volatile float x = b.data()[0]; (void)x; }, "");
  {
    GuardedBackend::Open open(g);  // what every operation does around the inner backend
    EXPECT_EQ(b.data()[0], 0.f);
  }
}

// Build on `b` instead of the spec's backend.
ModelEnv on(Backend& b) {
  ModelEnv env;
  env.backend = &b;
  return env;
}

ModelSpec lstm_spec() {
  ModelSpec s;
  s.type = "lstm";
  s.input_size = 3;
  s.lookback = 6;
  s.hidden = 8;
  s.layers = 2;
  s.dropout = 0.1f;
  s.output_size = 2;
  s.backend = "reference";
  return s;
}

// A small GPT with dropout: every GPT op runs in a step.
ModelSpec gpt_spec() {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 11;
  s.lookback = s.output_size = 8;
  s.input_size = 1;
  s.layers = 2;
  s.heads = 2;
  s.hidden = 12;
  s.dropout = 0.1f;
  s.backend = "reference";
  return s;
}

TEST(DeviceMemory, ParamStoreAllocatesFromItsBackendAndStagesHostWrites) {
  GuardedBackend g(ref());
  auto model = make_model(lstm_spec(), on(g));
  ParamStore& ps = model->params();
  EXPECT_EQ(&ps.backend(), &g);
  EXPECT_FALSE(ps.host_accessible());
  EXPECT_EQ(g.counts().allocations, 2u);  // parameters and gradients
  EXPECT_CONTAINS(error_of([&] { ps.set_backend(ref()); }), "must be chosen before the model is built");
  Rng rng(3);
  model->init(rng);  // staged on the host, uploaded once
  EXPECT_EQ(g.counts().from_host, 1u);
  std::vector<float> w(ps.size()), too_long(ps.size() + 1);
  ps.read_params(w);
  EXPECT_NE(w[0], 0.f);
  EXPECT_CONTAINS(error_of([&] { ps.read_params(too_long); }), "does not fit a device buffer of");
  {
    ParamStore::HostParams host(ps);  // dropped without commit(): the device keeps its values
    ps.params()[0] = 123.f;
  }
  std::vector<float> again(ps.size());
  ps.read_params(again);
  EXPECT_EQ(again, w);
  {
    ParamStore::HostParams host(ps);
    ps.params()[0] = 123.f;
    EXPECT_CONTAINS(error_of([&] { ps.read_view(); }), "inside a HostParams scope");
    host.commit();
  }
  ps.read_params(again);
  EXPECT_EQ(again[0], 123.f);
  model.reset();
  EXPECT_EQ(g.live_buffers(), 0u);
}

// ---- training on the guarded backend against the plain reference backend ----

struct Job {
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LrSchedule> sched;
  std::unique_ptr<LossScaler> scaler;
  std::unique_ptr<TrainStep> step;
  std::vector<double> losses;
  bool tokens = false;    // a language model: int64 token batches and cross-entropy
  bool classify = false;  // int64 class labels [4] and cross-entropy over output_size classes
  float target_scale = 1.f;  // regression targets times this
};

// SGD runs also scale the loss (fp16's dynamic loss scaling), so the step unscales on the device;
// `scaling` gives an AdamW run a loss scaler too.
Job make_job(Backend* backend, const std::string& optimizer, const ModelSpec& spec = lstm_spec(),
             bool classify = false, std::optional<LossScalerOptions> scaling = std::nullopt) {
  Job r;
  r.model = make_model(spec, backend ? on(*backend) : ModelEnv{});
  Rng init(42);
  r.model->init(init);
  OptimizerOptions o{.name = optimizer, .lr = 3e-3};
  if (optimizer == "sgd") o.momentum = 0.9;
  r.opt = make_optimizer(o, r.model->params().backend());
  r.opt->set_decay_mask(r.model->params().decay_mask());
  r.sched = make_schedule(ScheduleOptions{.base_lr = 3e-3});
  if (optimizer == "sgd") r.scaler = std::make_unique<LossScaler>(LossScalerOptions{.init = 1024.0});
  if (scaling) r.scaler = std::make_unique<LossScaler>(*scaling);
  r.tokens = r.model->spec().vocab_size > 0;
  r.classify = classify;
  StepOptions so;
  if (r.tokens || classify) so.loss = LossKind::cross_entropy;
  so.grad_clip = 0.5;
  so.grad_accum = 2;
  so.scaler = r.scaler.get();
  r.step = std::make_unique<TrainStep>(*r.model, *r.opt, *r.sched, so);
  return r;
}

// Batch s: 4 rows from Rng(1000 + s): regression windows, or for a language model tokens whose
// inputs are a fixed function of their targets.
// One step s of a job's fixed batch sequence (nothing read back).
void step_once(Job& r, int64_t s) {
  const ModelSpec& spec = r.model->spec();
  {
    Rng rng(1000 + s);
    if (r.tokens) {
      const int64_t V = spec.vocab_size, T = spec.lookback;
      std::vector<float> x(4 * T);
      std::vector<int64_t> y(4 * T);
      random_token_batch(rng, V, x, y);
      r.step->run(Tensor(x.data(), {4, T}), Tensor(y.data(), {4, T}, DType::i64), static_cast<uint64_t>(s));
    } else {
      std::vector<float> x(4 * 6 * 3), y(4 * 2);
      for (auto& v : x) v = rng.uniform(-1.f, 1.f);
      for (auto& v : y) v = rng.uniform(-1.f, 1.f) * r.target_scale;
      std::vector<int64_t> labels(4);
      for (auto& l : labels) l = static_cast<int64_t>(rng.uniform(0.f, 0.999f) * static_cast<float>(spec.output_size));
      const Tensor targets = r.classify ? Tensor(labels.data(), {4}, DType::i64) : Tensor(y.data(), {4, 2});
      r.step->run(Tensor(x.data(), {4, 6, 3}), targets, static_cast<uint64_t>(s));
    }
  }
}

// Steps [from, to), reading the loss after each (a log interval of one step).
void train(Job& r, int64_t from, int64_t to) {
  for (int64_t s = from; s < to; ++s) {
    step_once(r, s);
    r.losses.push_back(r.step->take_loss());
  }
}

std::vector<float> weights(const Job& r) {
  std::vector<float> w(r.model->params().size());
  r.model->params().read_params(w);
  return w;
}

void save(const Job& r, const std::string& dir) {
  save_checkpoint(dir, CheckpointData{&r.model->params(), r.opt->state(), {{"step", r.losses.size()}}, {}});
}

void expect_bitwise_equal(const Job& guarded, const Job& plain) {
  EXPECT_EQ(guarded.losses, plain.losses);
  EXPECT_EQ(weights(guarded), weights(plain));
  const OptimizerState a = guarded.opt->state(), b = plain.opt->state();
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.buffers, b.buffers);
}

void guarded_matches_reference(const std::string& optimizer) {
  GuardedBackend g(ref());
  Job guarded = make_job(&g, optimizer), plain = make_job(nullptr, optimizer);
  const GuardedBackend::Counts before = g.counts();
  train(guarded, 0, 4);
  train(plain, 0, 4);
  // The step copies only its batch across the seam (inputs and targets) and reads nothing back:
  // train() reads the loss once per step it logs (take_loss, one copy), and SGD's loss scaler its
  // overflow flag once per optimizer step (the sgd job scales its loss, 2 updates of 2
  // micro-batches; AdamW would skip on the device): train/step.h. The first step allocates the
  // optimizer's state, the step's sums and the activation arena's chunk.
  EXPECT_EQ(g.counts().to_host, before.to_host + 4 + (optimizer == "sgd" ? 2u : 0u));
  EXPECT_EQ(g.counts().value_reads, before.value_reads);
  EXPECT_EQ(g.counts().from_host, before.from_host + 4 * 2);
  EXPECT_EQ(g.counts().allocations, before.allocations + (optimizer == "adamw" ? 2u : 1u) + 1u);
  EXPECT_NE(guarded.losses.front(), guarded.losses.back());
  expect_bitwise_equal(guarded, plain);

  // Checkpoints through the copy path hold the same bytes as the reference backend's.
  TempDir dir;
  save(guarded, dir / "guarded");
  save(plain, dir / "plain");
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(bytes_of(dir / ("guarded/" + std::string(f))), bytes_of(dir / ("plain/" + std::string(f)))) << f;

  // Resume on the guarded backend from the reference backend's checkpoint: bitwise the same run.
  Job resumed = make_job(&g, optimizer);
  OptimizerState os;
  load_checkpoint(dir / "plain", resumed.model->params(), &os);
  resumed.opt->load_state(os);
  resumed.losses = guarded.losses;
  train(resumed, 4, 7);
  train(plain, 4, 7);
  expect_bitwise_equal(resumed, plain);
}

// The step reads nothing back between log intervals (on a GPU every read is a synchronization):
// steps leave the host-read count where it was, whatever the model (a forecaster's regression
// loss and clipping; the GPT's token ids and cross-entropy); the one read of the loss at the
// log interval and the one of the norm are all there is, and they give the reference path's
// values bit for bit.
TEST(DeviceMemory, AStepReadsNothingBackBetweenLogIntervals) {
  for (const bool gpt : {false, true}) {
    SCOPED_TRACE(gpt ? "gpt" : "lstm forecaster");
    GuardedBackend g(ref());
    Job guarded = gpt ? make_job(&g, "adamw", gpt_spec()) : make_job(&g, "adamw");
    Job plain = gpt ? make_job(nullptr, "adamw", gpt_spec()) : make_job(nullptr, "adamw");
    const size_t reads = g.host_reads();
    for (int64_t s = 0; s < 6; ++s) {
      step_once(guarded, s);
      step_once(plain, s);
      EXPECT_EQ(g.host_reads(), reads) << "step " << s << " read something back";
    }
    EXPECT_EQ(guarded.step->take_loss(), plain.step->take_loss());
    EXPECT_EQ(g.host_reads(), reads + 1);
    EXPECT_EQ(guarded.step->grad_norm(), plain.step->grad_norm());
    EXPECT_EQ(g.host_reads(), reads + 2);
    EXPECT_EQ(guarded.step->take_loss(), 0.0);  // the sums restarted
  }
}

// fp16's loss scaling on the device: an AdamW step unscales, clips, skips an overflow and moves
// the scale without reading anything back. A scale of 2^127 overflows the first steps (the
// targets are large) and a growth interval of 2 brings overflows back; at the log interval the
// loss, the scale and the skips are one read each, and everything is the reference run's bit for
// bit.
TEST(DeviceMemory, AnFp16StepReadsNothingBackBetweenLogIntervals) {
  const LossScalerOptions scaling{.init = 0x1p127, .growth_interval = 2};
  GuardedBackend g(ref());
  Job guarded = make_job(&g, "adamw", lstm_spec(), false, scaling);
  Job plain = make_job(nullptr, "adamw", lstm_spec(), false, scaling);
  guarded.target_scale = plain.target_scale = 100.f;
  const size_t reads = g.host_reads();
  for (int64_t s = 0; s < 16; ++s) {
    step_once(guarded, s);
    step_once(plain, s);
    EXPECT_EQ(g.host_reads(), reads) << "step " << s << " read something back";
  }
  EXPECT_EQ(guarded.step->take_loss(), plain.step->take_loss());
  EXPECT_EQ(guarded.scaler->scale(), plain.scaler->scale());
  const int64_t skipped = guarded.scaler->take_skipped_since_report();
  EXPECT_EQ(g.host_reads(), reads + 3);
  EXPECT_EQ(skipped, plain.scaler->take_skipped_since_report());
  EXPECT_GT(skipped, 1);
  EXPECT_LT(skipped, 8);
  EXPECT_EQ(guarded.step->grad_norm(), plain.step->grad_norm());
  EXPECT_EQ(guarded.scaler->to_json(), plain.scaler->to_json());
  expect_bitwise_equal(guarded, plain);
  EXPECT_EQ(guarded.opt->step_count(), 8 - skipped);  // 16 micro-batches of 2
}

TEST(DeviceMemory, GuardedBackendTrainsAdamWBitwiseLikeTheReference) { guarded_matches_reference("adamw"); }

// The GPT on memory the host may not touch: embedding, LayerNorm, attention, GELU, dropout, the
// tied head and cross-entropy all run through the backend, so it trains like the reference.
TEST(DeviceMemory, GuardedBackendTrainsAGptBitwiseLikeTheReference) {
  ModelSpec s = gpt_spec();
  GuardedBackend g(ref());
  Job guarded = make_job(&g, "adamw", s), plain = make_job(nullptr, "adamw", s);
  const size_t copies = g.copies();
  train(guarded, 0, 4);
  train(plain, 0, 4);
  // Per step: the batch up (inputs, targets) and train()'s one loss read (take_loss); once, at
  // the first step of the batch shape, the position ids.
  EXPECT_EQ(g.copies(), copies + 4 * 3 + 1) << "a training step copied more than its batch across the seam";
  EXPECT_EQ(g.counts().value_reads, 0u) << "a training step read a value back";
  EXPECT_NE(guarded.losses.front(), guarded.losses.back());
  expect_bitwise_equal(guarded, plain);
}
TEST(DeviceMemory, GuardedBackendTrainsScaledSgdMomentumBitwiseLikeTheReference) { guarded_matches_reference("sgd"); }

// An arena over a backend takes its chunks from allocate(), clears through fill when the host
// cannot touch them, and still makes no allocation in the steady state.
TEST(DeviceMemory, ArenaOverAGuardedBackendAllocatesAndClearsOnTheDevice) {
  GuardedBackend g(ref());
  {
    Arena arena(g);
    EXPECT_FALSE(arena.host_accessible());
    Tensor z = arena.zeros({3, 5});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(z.ptr) % Arena::kAlign, 0u);
    std::vector<float> back(15, 1.f);
    g.copy_to_host(z.ptr, back.data(), z.nbytes());
    EXPECT_EQ(back, std::vector<float>(15, 0.f));
    arena.prefault();  // host memory only: must not touch the guarded pages
    const uint64_t before = Arena::os_allocations();
    for (int i = 0; i < 3; ++i) {
      arena.reset();
      arena.zeros({100}, DType::i64);
      arena.tensor({7});
    }
    EXPECT_EQ(Arena::os_allocations(), before);
    EXPECT_EQ(g.live_buffers(), 1u);
    EXPECT_CONTAINS(error_of([&] { arena.set_backend(ref()); }), "before its first allocation");
  }
  EXPECT_EQ(g.live_buffers(), 0u);
}

// ---- activations on the device: the step's arena is the guarded backend's memory too ----

// Trains `spec` for 5 steps on the guarded backend (arena, batch, parameters all PROT_NONE to the
// host) and on the plain reference: a stray host access to any activation faults; the run must
// match bit for bit, and each step crosses the seam exactly twice (inputs and targets uploaded)
// plus train()'s loss read per step (take_loss: one copy); no operation returns a value.
void guarded_activations_match_reference(const ModelSpec& spec, bool classify = false) {
  GuardedBackend g(ref());
  Job guarded = make_job(&g, "adamw", spec, classify), plain = make_job(nullptr, "adamw", spec, classify);
  EXPECT_EQ(guarded.step->arena().memory(), static_cast<DeviceMemory*>(&g));
  EXPECT_FALSE(guarded.step->arena().host_accessible());
  const GuardedBackend::Counts before = g.counts();
  constexpr int64_t kSteps = 5;
  train(guarded, 0, kSteps);
  train(plain, 0, kSteps);
  // The GPT uploads its [B, T] position ids once, at the first step of the batch shape.
  const bool gpt = spec.type == "gpt";
  EXPECT_EQ(g.counts().from_host - before.from_host, size_t{2} * kSteps + (gpt ? 1 : 0));
  EXPECT_EQ(g.counts().to_host - before.to_host, size_t{1} * kSteps);
  EXPECT_EQ(g.counts().value_reads - before.value_reads, 0u);
  EXPECT_EQ(g.counts().from_host_bytes - before.from_host_bytes,
            kSteps * (guarded.tokens ? 2 * 4 * spec.lookback * 8 - 4 * spec.lookback * 4
                                     : 4 * 6 * 3 * 4 + (classify ? 4 * 8 : 4 * 2 * 4)) +
                (gpt ? 4 * spec.lookback * 8 : 0));
  EXPECT_NE(guarded.losses.front(), guarded.losses.back());
  expect_bitwise_equal(guarded, plain);
}

TEST(DeviceMemory, GuardedActivationsTrainAnLstmForecasterBitwiseLikeTheReference) {
  guarded_activations_match_reference(lstm_spec());
}

TEST(DeviceMemory, GuardedActivationsTrainAGruClassifierBitwiseLikeTheReference) {
  ModelSpec s = lstm_spec();
  s.type = "gru";
  s.output_size = 3;
  guarded_activations_match_reference(s, /*classify=*/true);
}

TEST(DeviceMemory, GuardedActivationsTrainACharLstmBitwiseLikeTheReference) {
  ModelSpec s;
  s.type = "char_lstm";
  s.vocab_size = 9;
  s.embed_size = 4;
  s.hidden = 8;
  s.layers = 2;
  s.lookback = s.output_size = 6;
  s.input_size = 1;
  s.dropout = 0.1f;
  s.backend = "reference";
  guarded_activations_match_reference(s);
}

// The cnn with model.norm batch: BatchNorm's statistics and their running update (buffers in the
// parameter buffer) stay on the device, with nothing read back, and train as on the reference.
TEST(DeviceMemory, GuardedActivationsTrainACnnWithBatchNormBitwiseLikeTheReference) {
  ModelSpec s = lstm_spec();
  s.type = "cnn";
  s.kernel_sizes = {3, 2};
  s.layers = 2;
  s.norm = "batch";
  guarded_activations_match_reference(s);
}

TEST(DeviceMemory, GuardedActivationsTrainAGptWithDropoutBitwiseLikeTheReference) {
  guarded_activations_match_reference(gpt_spec());
}

TEST(DeviceMemory, GuardedActivationsTrainACheckpointedGptBitwiseLikeTheReference) {
  ModelSpec s = gpt_spec();
  s.grad_checkpoint = true;  // the blocks recompute in Gpt's scratch arena, also on the device
  guarded_activations_match_reference(s);
}

// A bad token id in a batch on the device is still named: the op finds it, one value is read back.
TEST(DeviceMemory, GuardedTokenIdsNameABadIdFromDeviceMemory) {
  ModelSpec s;
  s.type = "char_lstm";
  s.vocab_size = 5;
  s.embed_size = 4;
  s.hidden = 8;
  s.layers = 1;
  s.lookback = s.output_size = 3;
  s.input_size = 1;
  s.backend = "reference";
  GuardedBackend g(ref());
  Job job = make_job(&g, "adamw", s);
  std::vector<float> x = {0, 1, 2, 3, 9, 1};
  std::vector<int64_t> y(6, 1);
  EXPECT_CONTAINS(error_of([&] { job.step->run(Tensor(x.data(), {2, 3}), Tensor(y.data(), {2, 3}, DType::i64), 0); }),
                  "token id 9 at batch 1 position 1 is outside the vocabulary of 5 ids");
}

// On a host-accessible backend the host views are the memory itself: training, saving and
// loading a checkpoint's weights copy nothing but what they write or read.
TEST(DeviceMemory, HostAccessibleBackendTrainsWithoutCopies) {
  GuardedBackend counting(ref(), /*protect=*/false);
  Job r = make_job(&counting, "adamw");
  train(r, 0, 3);
  EXPECT_EQ(counting.copies(), 0u);  // init and the steps: direct
  const HostReadView view = r.model->params().read_view();
  EXPECT_FALSE(view.copied());
  EXPECT_EQ(view.data(), r.model->params().params());
  TempDir dir;
  save_params(dir / "m.safetensors", r.model->params());
  EXPECT_EQ(counting.copies(), 0u);
}

TEST(DeviceMemory, LossScalerUnscalesOnADeviceLikeOnTheHost) {
  GuardedBackend g(ref());
  LossScaler scaler(LossScalerOptions{.init = 1024.0}), on_host(LossScalerOptions{.init = 1024.0});
  scaler.use_backend(g);  // the state moves to the device
  EXPECT_EQ(scaler.scale(), 1024.f);
  std::vector<float> host = {1.f, -3.f, 1e-3f, 2048.f};
  DeviceBuffer dev(g, host.size());
  dev.upload(host);
  EXPECT_TRUE(scaler.unscale_finite(dev.data(), dev.size()));
  EXPECT_TRUE(on_host.unscale_finite(host.data(), host.size()));
  std::vector<float> back(host.size());
  dev.download(back);
  EXPECT_EQ(back, host);
  host[2] = INFINITY;
  dev.upload(host);
  EXPECT_FALSE(scaler.unscale_finite(dev.data(), dev.size()));
  scaler.update();  // backs off on the device
  EXPECT_EQ(scaler.scale(), 512.f);
  EXPECT_EQ(scaler.skipped_total(), 1);
}

// Generation reads the weights on the host through a view: a char LM on the guarded backend
// gives the reference backend's logits.
TEST(DeviceMemory, CharLmStepReadsGuardedWeightsThroughTheView) {
  ModelSpec s;
  s.type = "char_lstm";
  s.vocab_size = 7;
  s.embed_size = 4;
  s.hidden = 8;
  s.layers = 2;
  s.backend = "reference";
  GuardedBackend g(ref());
  auto a = make_model(s, on(g));
  auto b = make_model(s);
  Rng r1(5), r2(5);
  a->init(r1);
  b->init(r2);
  auto& ca = static_cast<CharLm&>(*a);
  auto& cb = static_cast<CharLm&>(*b);
  CharLmState sa = ca.initial_state(), sb = cb.initial_state();
  std::vector<float> la(7), lb(7);
  for (int64_t id : {1, 4, 2}) {
    ca.step(id, sa, la.data());
    cb.step(id, sb, lb.data());
    EXPECT_EQ(la, lb);
  }
}

}  // namespace
}  // namespace seqtrain::testing
