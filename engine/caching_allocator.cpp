#include "engine/caching_allocator.h"

#include "util/check.h"

namespace cg {

size_t CachingAllocator::round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(1) << 20, kLargeStep = size_t(2) << 20;
  if (bytes == 0) return kSmall;
  return bytes < kLarge ? (bytes + kSmall - 1) / kSmall * kSmall : (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

CachingAllocator::CachingAllocator(MemoryBackend backend, size_t max_cached_bytes)
    : backend_(std::move(backend)), max_cached_(max_cached_bytes) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void* CachingAllocator::allocate(size_t bytes, uint64_t stream) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* p = nullptr;
  auto it = cached_.find({stream, size});
  if (it != cached_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
  } else {
    p = backend_.allocate(size);
    if (!p && stats_.cached_bytes > 0) {  // give the cache back and try once more
      release_cached_locked();
      p = backend_.allocate(size);
    }
    if (!p)
      throw Error(fmt::format("out of {} memory allocating {} bytes ({} bytes in use, peak {})", backend_.name,
                              bytes, stats_.in_use_bytes, stats_.peak_in_use_bytes));
    ++stats_.backend_allocations;
  }
  live_[p] = {size, stream};
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return p;
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  CG_CHECK(it != live_.end(), "{} allocator: freeing a pointer it did not allocate", backend_.name);
  const Block b = it->second;
  live_.erase(it);
  stats_.in_use_bytes -= b.size;
  if (stats_.cached_bytes + b.size > max_cached_) {
    backend_.release(ptr);
    ++stats_.backend_releases;
    return;
  }
  cached_[{b.stream, b.size}].push_back(ptr);
  stats_.cached_bytes += b.size;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, blocks] : cached_)
    for (void* p : blocks) {
      backend_.release(p);
      ++stats_.backend_releases;
    }
  cached_.clear();
  stats_.cached_bytes = 0;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

}  // namespace cg
