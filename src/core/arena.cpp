#include "core/arena.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace seqtrain {
namespace {
std::atomic<uint64_t> g_os_allocations{0};
size_t round_up(size_t n) { return (n + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign; }
void free_bytes(std::byte* p) { std::free(p); }
}  // namespace

uint64_t Arena::os_allocations() { return g_os_allocations.load(); }

void Arena::add_chunk(size_t bytes) {
  void* p = std::aligned_alloc(kAlign, round_up(bytes));
  ST_CHECK(p != nullptr, "out of memory: the activation arena could not get {} MiB", bytes >> 20);
  g_os_allocations.fetch_add(1);
  Chunk c;
  c.mem = {static_cast<std::byte*>(p), free_bytes};
  c.size = round_up(bytes);
  chunks_.push_back(std::move(c));
}

void* Arena::alloc(size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes);
  if (chunks_.empty() || chunks_.back().top + bytes > chunks_.back().size)
    add_chunk(std::max<size_t>(bytes, chunks_.empty() ? (1u << 20) : chunks_.back().size));
  Chunk& c = chunks_.back();
  void* p = c.mem.get() + c.top;
  c.top += bytes;
  used_ += bytes;
  high_water_ = std::max(high_water_, used_);
  return p;
}

Tensor Arena::tensor(Shape shape, DType t) {
  size_t bytes = numel_of(shape) * dtype_size(t);
  return Tensor(alloc(bytes), std::move(shape), t);
}

Tensor Arena::zeros(Shape shape, DType t) {
  Tensor x = tensor(std::move(shape), t);
  std::memset(x.ptr, 0, x.nbytes());
  return x;
}

size_t Arena::capacity() const {
  size_t total = 0;
  for (const auto& c : chunks_) total += c.size;
  return total;
}

void Arena::reset() {
  if (chunks_.size() > 1) {
    size_t need = capacity() > used_ ? capacity() : used_;
    chunks_.clear();
    add_chunk(need);
  }
  for (auto& c : chunks_) c.top = 0;
  used_ = 0;
}

void Arena::prefault() {
  reset();
  for (auto& c : chunks_) std::memset(c.mem.get(), 0, c.size);
}

}  // namespace seqtrain
