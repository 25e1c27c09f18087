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
  for (auto& [key, blocks] : cached_)
    for (void* p : blocks) backend_.release(p);
  cached_.clear();
}

void* CachingAllocator::take_cached_locked(const CacheKey& key) {
  auto it = cached_.find(key);
  if (it == cached_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  stats_.cached_bytes -= std::get<2>(key);
  return p;
}

void* CachingAllocator::allocate(size_t bytes, uint64_t stream) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto route = routed_.find(stream);
  const PoolId pool = route == routed_.end() ? 0 : route->second;
  void* p = take_cached_locked({pool, stream, size});
  const bool fresh = p == nullptr;
  if (fresh) {
    p = backend_.allocate(size);
    // Giving the shared cache back frees memory in the backend (cudaFree), which a capture in
    // progress cannot survive; then the request fails instead.
    if (!p && routed_.empty() && stats_.cached_bytes > 0) {
      release_cached_locked(0);
      p = backend_.allocate(size);
    }
    if (!p)
      throw OutOfMemory(fmt::format("out of {} memory allocating {} bytes ({} bytes in use, peak {}{})", backend_.name,
                              bytes, stats_.in_use_bytes, stats_.peak_in_use_bytes,
                              routed_.empty() ? "" : "; during CUDA graph capture the cache cannot be returned"));
    ++stats_.backend_allocations;
  }
  live_[p] = {size, stream, pool};
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  if (pool != 0) {
    PoolStats& ps = pools_.at(pool).stats;
    ps.in_use_bytes += size;
    if (fresh) ps.reserved_bytes += size;
  }
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
  if (b.pool != 0) {
    auto pool = pools_.find(b.pool);
    pool->second.stats.in_use_bytes -= b.size;
    if (!pool->second.released) {  // kept for this pool alone, whatever the cache limit
      cached_[{b.pool, b.stream, b.size}].push_back(ptr);
      stats_.cached_bytes += b.size;
      return;
    }
    pool->second.stats.reserved_bytes -= b.size;  // the pool is gone: the block leaves it
    if (pool->second.stats.reserved_bytes == 0) pools_.erase(pool);
  }
  if (stats_.cached_bytes + b.size > max_cached_ && routed_.empty()) {
    backend_.release(ptr);
    ++stats_.backend_releases;
    return;
  }
  cached_[{0, b.stream, b.size}].push_back(ptr);
  stats_.cached_bytes += b.size;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  CG_CHECK(routed_.empty(), "{} allocator: empty_cache() during CUDA graph capture (it would free device memory)",
           backend_.name);
  release_cached_locked(0);
}

void CachingAllocator::release_cached_locked(PoolId pool) {
  for (auto it = cached_.begin(); it != cached_.end();) {
    if (std::get<0>(it->first) != pool) {
      ++it;
      continue;
    }
    const size_t size = std::get<2>(it->first);
    for (void* p : it->second) {
      backend_.release(p);
      ++stats_.backend_releases;
      stats_.cached_bytes -= size;
      if (pool != 0) pools_.at(pool).stats.reserved_bytes -= size;
    }
    it = cached_.erase(it);
  }
}

CachingAllocator::Pool& CachingAllocator::pool_locked(PoolId pool, const char* what) {
  auto it = pools_.find(pool);
  CG_CHECK(pool != 0 && it != pools_.end() && !it->second.released, "{} allocator: {} of pool {}, which does not exist",
           backend_.name, what, pool);
  return it->second;
}

PoolId CachingAllocator::create_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  const PoolId id = next_pool_++;
  pools_[id] = Pool{};
  return id;
}

void CachingAllocator::route_stream(uint64_t stream, PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_locked(pool, "routing a stream into");
  auto [it, inserted] = routed_.emplace(stream, pool);
  CG_CHECK(inserted, "{} allocator: stream {:#x} is already routed into pool {} (nested capture?)", backend_.name,
           stream, it->second);
}

void CachingAllocator::unroute_stream(uint64_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  routed_.erase(stream);
}

void CachingAllocator::release_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  Pool& p = pool_locked(pool, "release");
  for (const auto& [stream, routed_pool] : routed_)
    CG_CHECK(routed_pool != pool, "{} allocator: releasing pool {} while stream {:#x} is routed into it", backend_.name,
             pool, stream);
  CG_CHECK(routed_.empty(), "{} allocator: releasing pool {} during a CUDA graph capture (it would free device memory)",
           backend_.name, pool);
  release_cached_locked(pool);
  p.released = true;
  if (p.stats.reserved_bytes == 0) pools_.erase(pool);
}

PoolStats CachingAllocator::pool_stats(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(pool);
  return it == pools_.end() ? PoolStats{} : it->second.stats;
}

PoolId CachingAllocator::pool_of(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(const_cast<void*>(ptr));
  CG_CHECK(it != live_.end(), "{} allocator: pool_of a pointer that is not a live block", backend_.name);
  return it->second.pool;
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
