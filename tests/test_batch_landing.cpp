// The batch's copy lane without a GPU (backend/batch_landing.h, backend/pinned_buffers.h):
// TrainStep on a CaptureBackend with a copy lane, which runs everything at once but logs every
// operation, upload, lane mark and wait in the order they were issued, as a GPU's two streams
// would receive them. The log must show batch k+1 going up first thing in step k+1, with nothing
// waited on by the host since step k, into the landing buffer step k does not read, after only
// step k-1's end on the compute lane, and step k+1's work ordered after its copies; a loader slot
// that a copy read directly must not be refilled before the host waited for that copy; and the
// losses, norms, weights and AdamW's moments must be the one-lane path's bit for bit, captured or
// not (tests/test_cuda_graphs.cpp holds a GPU's two streams to its one the same way).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "capture_backend.h"
#include "graph_runs.h"

namespace seqtrain::testing {
namespace {

using Event = CaptureBackend::LaneEvent;
using Lane = Backend::Lane;

// A run on its own CaptureBackend over the CPU backend, with a copy lane or without.
GraphRun run_on(bool copy_lane, bool graphs) {
  auto backend = std::make_shared<CaptureBackend>(backend_named("cpu"), copy_lane);
  GraphRun r = graph_run(*backend, {.spec = graph_mlp(), .graphs = graphs});
  r.owned = backend;
  return r;
}

CaptureBackend& backend_of(const GraphRun& r) { return static_cast<CaptureBackend&>(*r.owned); }

// One step's events: from the start of its run() to the next one's.
struct Segment {
  std::vector<Event> events;
  size_t first_at = 0;  // the log index of events[0]
  // The index in events of the first event of `kind` (and lane, for marks and waits), or size().
  size_t find(Event::Kind kind, Lane lane = Lane::compute, size_t from = 0) const {
    for (size_t i = from; i < events.size(); ++i)
      if (events[i].kind == kind && (kind == Event::op || kind == Event::upload || events[i].lane == lane)) return i;
    return events.size();
  }
};

// Steps of four rows, their loss read only after the last: between log intervals.
std::vector<Segment> logged_steps(GraphRun& r, int64_t steps) {
  CaptureBackend& be = backend_of(r);
  be.clear_lane_log();
  std::vector<size_t> starts;
  for (int64_t s = 0; s < steps; ++s) {
    starts.push_back(be.lane_log().size());
    graph_step(r, s, 4, /*ignore_one=*/false, /*read=*/false);
  }
  const std::vector<Event> log = be.lane_log();
  starts.push_back(log.size());
  std::vector<Segment> out;
  for (int64_t s = 0; s < steps; ++s)
    out.push_back({std::vector<Event>(log.begin() + starts[s], log.begin() + starts[s + 1]), starts[s]});
  return out;
}

bool overlaps(const Segment& a, const Segment& b) {
  for (const Event& x : a.events)
    for (const Event& y : b.events) {
      if (x.kind != Event::upload || y.kind != Event::upload) continue;
      const auto *xd = static_cast<const char*>(x.dst), *yd = static_cast<const char*>(y.dst);
      if (xd < yd + y.bytes && yd < xd + x.bytes) return true;
    }
  return false;
}

std::vector<const void*> destinations(const Segment& s) {
  std::vector<const void*> d;
  for (const Event& e : s.events)
    if (e.kind == Event::upload) d.push_back(e.dst);
  return d;
}

// The order of each step k from 2 on (the landing buffers and the arena were sized by steps 0
// and 1), captured or not.
void expect_overlapped_order(bool graphs) {
  GraphRun r = run_on(/*copy_lane=*/true, graphs);
  const std::vector<Segment> steps = logged_steps(r, 8);
  // From here on nothing at all happens on the host (the capture, step 2, allocates AdamW's
  // device scalars at its first prepare).
  const size_t steady = graphs ? 3 : 2;
  for (size_t k = 2; k < steps.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const Segment& s = steps[k];
    const size_t upload = s.find(Event::upload), first_op = s.find(Event::op);
    ASSERT_LT(upload, first_op) << "the batch goes up before the step queues anything";
    // Nothing of step k-1 was waited for on the host before the upload (nor after, once steady).
    const size_t host_from = k >= steady ? s.events.size() : upload;
    EXPECT_GE(s.find(Event::host), host_from);
    EXPECT_EQ(s.find(Event::host_wait, Lane::copy), s.events.size());
    EXPECT_EQ(s.find(Event::host_wait, Lane::compute), s.events.size());
    // The copy lane waits for a compute mark taken before step k-1 queued its first operation:
    // the end of step k-2, never step k-1 itself.
    const size_t copy_wait = s.find(Event::wait, Lane::copy);
    ASSERT_LT(copy_wait, upload);
    const Segment& before = steps[k - 1];
    const size_t marked = before.find(Event::mark, Lane::compute);
    ASSERT_LT(marked, before.find(Event::op));
    EXPECT_EQ(s.events[copy_wait].m.lane, Lane::compute);
    EXPECT_EQ(s.events[copy_wait].m.seq, before.events[marked].m.seq);
    // Into the buffer step k-1 does not read; the one step k-2 read.
    EXPECT_FALSE(overlaps(s, before));
    EXPECT_EQ(destinations(s), destinations(steps[k - 2]));
    // Step k's work waits on the compute lane for the copy lane's mark after the batch.
    const size_t copy_mark = s.find(Event::mark, Lane::copy, upload);
    const size_t compute_wait = s.find(Event::wait, Lane::compute, copy_mark);
    ASSERT_LT(compute_wait, first_op);
    EXPECT_EQ(s.find(Event::upload, Lane::copy, copy_mark), s.events.size()) << "an upload after the mark";
    EXPECT_EQ(s.events[compute_wait].m.lane, Lane::copy);
    EXPECT_EQ(s.events[compute_wait].m.seq, s.events[copy_mark].m.seq);
  }
  if (graphs) {
    EXPECT_GT(backend_of(r).counts().replays, 0u) << graph_notes(r);
  }
}

TEST(BatchLanding, TheNextBatchGoesUpBesideTheStepBeforeIt) { expect_overlapped_order(/*graphs=*/false); }

TEST(BatchLanding, TheNextBatchGoesUpBesideTheCapturedStepBeforeIt) { expect_overlapped_order(/*graphs=*/true); }

// Three epochs of 4 batches and a short one, the one-lane path against the copy lane: every loss
// and norm, the weights and AdamW's moments bit for bit (captured: one capture per shape).
void expect_lane_matches_one_lane(bool graphs) {
  GraphRun lane = run_on(/*copy_lane=*/true, graphs), one = run_on(/*copy_lane=*/false, graphs);
  graph_epochs(lane, 3, 4);
  graph_epochs(one, 3, 4);
  expect_same_run(lane, one);
  EXPECT_EQ(backend_of(lane).counts().captures, backend_of(one).counts().captures);
  EXPECT_EQ(backend_of(lane).counts().replays, backend_of(one).counts().replays);
  if (graphs) {
    EXPECT_EQ(backend_of(lane).counts().replays, 11u) << graph_notes(lane);
  }
}

TEST(BatchLanding, StepsOnTheCopyLaneMatchTheOneLanePathBitwise) { expect_lane_matches_one_lane(false); }

TEST(BatchLanding, CapturedStepsOnTheCopyLaneMatchTheOneLanePathBitwise) { expect_lane_matches_one_lane(true); }

// A loader's slots from the backend's pinned allocator are read by the copies directly (no
// staging), and a slot is refilled only after the host waited for the copy of its last batch;
// the losses are the one-lane run's bit for bit.
void expect_slots_refilled_after_their_copies(int64_t workers, bool graphs) {
  SCOPED_TRACE("workers " + std::to_string(workers) + (graphs ? ", captured" : ""));
  GraphRun lane = run_on(/*copy_lane=*/true, graphs), one = run_on(/*copy_lane=*/false, graphs);
  CaptureBackend& be = backend_of(lane);
  NoiseSource source(19, 18, 2);  // 4 batches of 4 and one of 3
  std::atomic<int> fills{0}, early{0};
  source.on_fill = [&](const float* x, size_t bytes) {
    ++fills;
    if (be.reads_pending(x, bytes)) ++early;
  };
  loader_epochs(lane, source, 3, 4, workers, 5);
  NoiseSource plain(19, 18, 2);
  loader_epochs(one, plain, 3, 4, workers, 5);
  expect_same_run(lane, one);
  EXPECT_EQ(fills.load(), 15);
  EXPECT_EQ(early.load(), 0) << "a slot was refilled while a copy could still read it";
  size_t direct = 0, waits = 0;
  for (const Event& e : be.lane_log()) {
    direct += e.kind == Event::upload && e.direct;
    waits += e.kind == Event::host_wait && e.lane == Lane::copy;
  }
  EXPECT_EQ(direct, 30u);  // every batch's inputs and targets, from the slot itself
  EXPECT_EQ(waits, 30u);   // each read once: at its slot's refill, or when the loader freed the slot
}

TEST(BatchLanding, ALoaderSlotIsRefilledOnlyAfterItsCopy) {
  expect_slots_refilled_after_their_copies(0, false);
  expect_slots_refilled_after_their_copies(2, false);
  expect_slots_refilled_after_their_copies(2, true);
}

}  // namespace
}  // namespace seqtrain::testing
