#include "core/arena.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"


namespace seqtrain {
namespace {
std::atomic<uint64_t> g_os_allocations{0};
size_t round_up(size_t n) { return (n + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign; }
}  // namespace

uint64_t Arena::os_allocations() { return g_os_allocations.load(); }

Arena::~Arena() { clear_chunks(); }

void Arena::set_backend(DeviceMemory& backend) {
  ST_CHECK(chunks_.empty() || backend_ == &backend,
           "internal error: an arena's backend must be chosen before its first allocation");
  backend_ = &backend;
}

bool Arena::host_accessible() const { return !backend_ || backend_->host_accessible(); }

void Arena::add_chunk(size_t bytes) {
  const size_t size = round_up(bytes);
  // Backends align to kDeviceAlignment only; the arena's blocks need kAlign (cache lines).
  static_assert(kAlign % kDeviceAlignment == 0);
  void* p = backend_ ? backend_->allocate(size + kAlign) : std::aligned_alloc(kAlign, size);
  ST_CHECK(p != nullptr, "out of memory: the activation arena could not get {} MiB", bytes >> 20);
  g_os_allocations.fetch_add(1);
  Chunk c;
  c.mem = static_cast<std::byte*>(p);
  c.size = size;
  chunks_.push_back(c);
}

void Arena::free_chunk(Chunk& c) {
  if (backend_) backend_->release(c.mem);
  else std::free(c.mem);
  c.mem = nullptr;
}

void Arena::clear_chunks() {
  for (auto& c : chunks_) free_chunk(c);
  chunks_.clear();
}

// The first block of a backend chunk starts at the next kAlign boundary (allocate() promises less).
static std::byte* aligned(std::byte* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return p + ((Arena::kAlign - a % Arena::kAlign) % Arena::kAlign);
}

void* Arena::alloc(size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes);
  if (chunks_.empty() || chunks_.back().top + bytes > chunks_.back().size)
    add_chunk(std::max<size_t>(bytes, chunks_.empty() ? (1u << 20) : chunks_.back().size));
  Chunk& c = chunks_.back();
  void* p = aligned(c.mem) + c.top;
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
  if (host_accessible()) {
    std::memset(x.ptr, 0, x.nbytes());
  } else if (x.nbytes()) {
    // Whole floats of zero bits: blocks are kAlign-rounded, so the last partial word is ours.
    backend_->zero(x.ptr, (x.nbytes() + sizeof(float) - 1) / sizeof(float) * sizeof(float));
  }
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
    clear_chunks();
    add_chunk(need);
  }
  for (auto& c : chunks_) c.top = 0;
  used_ = 0;
}

void Arena::prefault() {
  reset();
  // Page faults are a host-memory matter; a device's memory is the device's.
  if (!host_accessible()) return;
  for (auto& c : chunks_) std::memset(aligned(c.mem), 0, c.size);
}

}  // namespace seqtrain
