// Loader: a prefetching batch loader over any BatchSource.
//
// N persistent worker threads claim batches of an epoch in increasing order and fill them into
// a fixed pool of reused slot buffers (workers * prefetch slots), while the training step
// consumes the batches, also in order. Because the batch order comes from epoch_order(seed,
// epoch) alone and a source's fill() may depend only on (indices, epoch), every worker count
// (0 = fill synchronously on the calling thread) yields identical batches bit for bit.
// The consumer's waiting time (data-wait) is measured so the trainer can report its share.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/host_allocator.h"
#include "core/system.h"
#include "data/batch_layout.h"
#include "data/batch_source.h"

namespace seqtrain {

// Rows [first, second) of a global batch of `rows` that rank `rank` of `world` takes.
inline std::pair<int64_t, int64_t> shard_rows(int64_t rows, int rank, int world) {
  return {rows * rank / world, rows * (rank + 1) / world};
}

struct LoaderOptions {
  int64_t workers = 0;      // background threads; 0 = fill on the consumer's thread in next()
  int64_t prefetch = 2;     // ready-or-filling batches per worker (slots = workers * prefetch)
  int64_t batch_size = 32;
  bool shuffle = false;     // order from epoch_order(size, shuffle, seed, epoch)
  uint64_t seed = 0;
  bool drop_last = false;   // drop the final partial batch of an epoch
  // Slot buffers (core/host_allocator.h; must outlive the Loader); nullptr = std::vector storage.
  // A training run passes its backend's pinned_allocator() (page-locked memory on a GPU).
  HostAllocator* allocator = nullptr;
  // Data parallelism (llm.c's loader): every rank walks the same global batches and fills its
  // own contiguous shard of each, rows [count*rank/world, count*(rank+1)/world). batch_size
  // is the global batch; a short last batch splits into shards that differ by at most a row.
  int rank = 0;
  int world = 1;
  SampleLayout layout{};  // how x and y become the batch's typed inputs and targets
};

// The batch buffers a Loader keeps: workers * prefetch ready or filling while the consumer holds
// one more (what train.batch_size: auto counts as the loader's memory).
inline int64_t loader_slots(int64_t workers, int64_t prefetch) {
  return std::max<int64_t>(1, workers * prefetch) + 1;
}

// One batch (data/batch_layout.h), valid from next() until release(). x: [count, x_size], y: [count,
// y_size]; inputs/targets the same data typed and shaped as LoaderOptions::layout says.

class Loader {
 public:
  // `source` must outlive the loader. Workers start here and live until destruction.
  Loader(const BatchSource& source, LoaderOptions opt);
  ~Loader();  // stops and joins the workers; batches still held become invalid
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Begins (or restarts) an epoch at batch `first_batch` (a resumed run's data cursor).
  // Batches of an earlier epoch still held by the caller stay valid until released.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the epoch in order, blocking until it is ready; nullptr at epoch end.
  // Rethrows (as Error) a failure raised by the source while filling this batch.
  const Batch* next();
  // Hands the batch's buffers back for refilling. Every batch from next() must be released;
  // holding every slot at once and calling next() again is an error, not a deadlock. A device
  // may still be copying from the buffers (an asynchronous upload of pinned memory): the refill
  // waits for it first (HostAllocator::await_readers), so release() itself never waits.
  void release(const Batch* b);

  int64_t batches_per_epoch() const;
  int64_t workers() const { return opt_.workers; }
  // Seconds the consumer spent inside next() waiting for data (including synchronous fills
  // when workers == 0), since construction or the last reset_wait().
  double wait_seconds() const;
  void reset_wait();

 private:
  struct Slot {
    BatchBuffers buf;  // x, y from the allocator when one is given
    std::vector<int64_t> idx;
    Batch batch;
    enum State { Free, Filling, Ready, Held } state = Free;
    uint64_t generation = 0;  // epoch generation the content belongs to
    std::exception_ptr error;
  };
  void worker_loop();
  bool claimable() const;  // a batch is left to claim and a slot is free (lock held)
  void claim(Slot& s);     // copies the next batch's indices into s (lock held)
  void fill_slot(Slot& s);

  const BatchSource& src_;
  LoaderOptions opt_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers wait for a claimable batch
  std::condition_variable ready_cv_;  // the consumer waits for its batch / a free slot
  bool stop_ = false;
  bool active_ = false;               // an epoch has been started
  uint64_t generation_ = 0;           // bumped by start_epoch so stale fills are discarded
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  int64_t n_batches_ = 0;
  int64_t next_claim_ = 0;            // next batch a worker will take
  int64_t next_consume_ = 0;          // next batch next() returns
  double wait_s_ = 0;
};

// The worker count for `data.workers: auto`, from free cores and available RAM:
//   RAM < 8 GiB -> 0 (synchronous: worker buffers and page cache pressure cost more than
//   they save); < 16 GiB -> at most 2; < 32 GiB -> at most 4; otherwise at most 8.
//   Cores: free_cores - 1 (one core stays with the training step), never below 0.
// Writes a one-line human reason (for the log) to *reason when given.
int64_t workers_auto(int64_t free_cores, int64_t free_ram_bytes, std::string* reason = nullptr);
// Its inputs on this machine: core/system.h's system_cores() and system_available_ram() (0 when
// unreadable, which workers_auto treats as short RAM).

}  // namespace seqtrain
