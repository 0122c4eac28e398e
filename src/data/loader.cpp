// Loader implementation. One mutex guards all slot states and the epoch cursor; it is held
// only to claim or hand over a slot (a few hundred index copies), never while filling, so
// workers fill in parallel. Workers claim batch numbers strictly in increasing order, which
// guarantees the batch the consumer waits for is always claimed before any later one: the
// bounded pool can never fill up with later batches and starve it.
#include "data/loader.h"
#include "core/trace.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace seqtrain {

void BatchSource::fill_lengths(std::span<const int64_t>, int64_t*) const {
  fail("internal error: fill_lengths() on a data source whose samples have no lengths");
}

Loader::Loader(const BatchSource& source, LoaderOptions opt) : src_(source), opt_(opt) {
  ST_CHECK(opt_.batch_size >= 1, "data.batch_size must be at least 1, got {}", opt_.batch_size);
  ST_CHECK(opt_.workers >= 0 && opt_.workers <= 256,
           "data.workers must be between 0 and 256 (or auto), got {}", opt_.workers);
  ST_CHECK(opt_.prefetch >= 1 && opt_.prefetch <= 64, "data.prefetch must be between 1 and 64, got {}",
           opt_.prefetch);
  ST_CHECK(src_.x_size() >= 0 && src_.y_size() >= 0, "data source reports a negative sample size");
  ST_CHECK(opt_.world >= 1 && opt_.rank >= 0 && opt_.rank < opt_.world, "loader: rank {} is not in a world of {}",
           opt_.rank, opt_.world);
  // workers * prefetch slots may be ready or filling while the consumer holds one more.
  const int64_t n_slots = loader_slots(opt_.workers, opt_.prefetch);
  slots_.resize(static_cast<size_t>(n_slots));
  const auto nx = static_cast<size_t>(opt_.batch_size * src_.x_size());
  const auto ny = static_cast<size_t>(opt_.batch_size * src_.y_size());
  for (auto& s : slots_) {
    if (opt_.allocator) {
      try {
        s.buf.x = opt_.allocator->allocate(nx);
        s.buf.y = opt_.allocator->allocate(ny);
      } catch (...) {
        // The destructor will not run: give back what was already allocated.
        for (auto& t : slots_) {
          if (t.buf.x) opt_.allocator->deallocate(t.buf.x, nx);
          if (t.buf.y) opt_.allocator->deallocate(t.buf.y, ny);
        }
        throw;
      }
    } else {
      s.buf.reserve(src_, opt_.batch_size);
    }
    s.idx.reserve(static_cast<size_t>(opt_.batch_size));
  }
  threads_.reserve(static_cast<size_t>(opt_.workers));
  for (int64_t i = 0; i < opt_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
  if (opt_.allocator) {
    for (auto& s : slots_) {
      opt_.allocator->deallocate(s.buf.x, static_cast<size_t>(opt_.batch_size * src_.x_size()));
      opt_.allocator->deallocate(s.buf.y, static_cast<size_t>(opt_.batch_size * src_.y_size()));
    }
  }
}

int64_t Loader::batches_per_epoch() const {
  const int64_t n = src_.size();
  return opt_.drop_last ? n / opt_.batch_size : batch_count(n, opt_.batch_size);
}

void Loader::start_epoch(int64_t epoch, int64_t first_batch) {
  const int64_t nb = batches_per_epoch();
  ST_CHECK(0 <= first_batch && first_batch <= nb,
           "data cursor: batch {} of epoch {} is outside the epoch's {} batches (was the dataset or "
           "batch_size changed since the checkpoint?)", first_batch, epoch, nb);
  // Computed outside the lock: workers may still be finishing fills of the previous epoch.
  std::vector<int64_t> order = epoch_order(static_cast<size_t>(src_.size()), opt_.shuffle, opt_.seed, epoch);
  {
    std::lock_guard lk(mu_);
    ++generation_;
    epoch_ = epoch;
    order_ = std::move(order);
    n_batches_ = nb;
    next_claim_ = next_consume_ = first_batch;
    active_ = true;
    // Ready batches of the old epoch are dropped; Filling ones are dropped by their worker
    // when it sees the generation changed; Held ones wait for release().
    for (auto& s : slots_)
      if (s.state == Slot::Ready) { s.state = Slot::Free; s.error = nullptr; }
  }
  work_cv_.notify_all();
}

bool Loader::claimable() const {
  if (!active_ || next_claim_ >= n_batches_) return false;
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == Slot::Free; });
}

void Loader::claim(Slot& s) {
  const int64_t b = next_claim_++;
  const int64_t begin = b * opt_.batch_size;
  const int64_t global = std::min<int64_t>(opt_.batch_size, static_cast<int64_t>(order_.size()) - begin);
  const auto [lo, hi] = shard_rows(global, opt_.rank, opt_.world);
  s.idx.assign(order_.begin() + begin + lo, order_.begin() + begin + hi);
  s.state = Slot::Filling;
  s.generation = generation_;
  s.error = nullptr;
  s.batch.epoch = epoch_;
  s.batch.index = b;  // the rest of the batch is fill_batch's
  s.batch.rows = opt_.world > 1 ? BatchRows{lo, global} : BatchRows{};
}

void Loader::fill_slot(Slot& s) {
  ST_TRACE("loader.fill_batch", "data", [&] { return "{\"samples\":" + std::to_string(s.idx.size()) + "}"; });
  try {
    // A device copy of the slot's last batch may still read it (backend/pinned_buffers.h): the
    // refill waits for that copy here, on the filling thread, not the step.
    if (opt_.allocator) {
      opt_.allocator->await_readers(s.buf.x);
      opt_.allocator->await_readers(s.buf.y);
    }
    fill_batch(src_, opt_.layout, s.idx, s.batch.epoch, s.buf, s.batch);
  } catch (...) {
    s.error = std::current_exception();
  }
}

void Loader::worker_loop() {
  trace::set_thread_name("loader worker");
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [this] { return stop_ || claimable(); });
    if (stop_) return;
    Slot* s = nullptr;
    for (auto& c : slots_)
      if (c.state == Slot::Free) { s = &c; break; }
    claim(*s);
    lk.unlock();
    fill_slot(*s);
    lk.lock();
    // A start_epoch() during the fill made this content stale: recycle the slot.
    s->state = s->generation == generation_ ? Slot::Ready : Slot::Free;
    if (s->state == Slot::Free) work_cv_.notify_one();
    ready_cv_.notify_all();
  }
}

const Batch* Loader::next() {
  using clock = std::chrono::steady_clock;
  std::unique_lock lk(mu_);
  ST_CHECK(active_, "Loader::next() called before start_epoch()");
  if (next_consume_ >= n_batches_) return nullptr;
  const auto all_held = [this] {
    return std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == Slot::Held; });
  };
  ST_CHECK(!all_held(), "Loader::next(): all {} batch buffers are held; release() a batch before asking "
           "for the next one", slots_.size());
  Slot* s = nullptr;
  const auto t0 = clock::now();
  if (threads_.empty()) {
    // Synchronous: the consumer fills the batch itself, and all of that time is data-wait.
    for (auto& c : slots_)
      if (c.state == Slot::Free) { s = &c; break; }
    ST_CHECK(s != nullptr, "Loader::next(): no free batch buffer; release() held batches first");
    claim(*s);
    lk.unlock();
    fill_slot(*s);
    lk.lock();
  } else {
    const auto find = [&]() -> Slot* {
      for (auto& c : slots_)
        if (c.state == Slot::Ready && c.generation == generation_ && c.batch.index == next_consume_) return &c;
      return nullptr;
    };
    while ((s = find()) == nullptr) {
      ST_CHECK(!all_held(), "Loader::next(): all batch buffers are held; release() a batch first");
      ready_cv_.wait(lk);
    }
  }
  wait_s_ += std::chrono::duration<double>(clock::now() - t0).count();
  ++next_consume_;
  if (s->error) {
    std::exception_ptr e = s->error;
    s->error = nullptr;
    s->state = Slot::Free;
    lk.unlock();
    work_cv_.notify_one();
    std::rethrow_exception(e);
  }
  s->state = Slot::Held;
  return &s->batch;
}

void Loader::release(const Batch* b) {
  if (b == nullptr) return;
  {
    std::lock_guard lk(mu_);
    Slot* s = nullptr;
    for (auto& c : slots_)
      if (&c.batch == b) s = &c;
    ST_CHECK(s != nullptr && s->state == Slot::Held,
             "Loader::release(): this batch was not handed out by next() or was released twice");
    s->state = Slot::Free;
  }
  work_cv_.notify_one();
  ready_cv_.notify_all();
}

double Loader::wait_seconds() const {
  std::lock_guard lk(mu_);
  return wait_s_;
}

void Loader::reset_wait() {
  std::lock_guard lk(mu_);
  wait_s_ = 0;
}

int64_t workers_auto(int64_t free_cores, int64_t free_ram_bytes, std::string* reason) {
  constexpr int64_t GiB = int64_t{1} << 30;
  const int64_t by_cores = std::max<int64_t>(0, free_cores - 1);
  int64_t cap = 8;
  std::string ram_note = "RAM is ample (>= 32 GiB available)";
  if (free_ram_bytes < 8 * GiB) { cap = 0; ram_note = "less than 8 GiB of RAM available, so loading stays synchronous"; }
  else if (free_ram_bytes < 16 * GiB) { cap = 2; ram_note = "8-16 GiB of RAM available caps workers at 2"; }
  else if (free_ram_bytes < 32 * GiB) { cap = 4; ram_note = "16-32 GiB of RAM available caps workers at 4"; }
  const int64_t n = std::min(by_cores, cap);
  if (reason) {
    *reason = fmt::format("data.workers auto = {}: {} free cores (one kept for the step) allow {}; {:.1f} GiB "
                          "available RAM: {}", n, std::max<int64_t>(0, free_cores), by_cores,
                          static_cast<double>(free_ram_bytes) / static_cast<double>(GiB), ram_note);
  }
  return n;
}

}  // namespace seqtrain
