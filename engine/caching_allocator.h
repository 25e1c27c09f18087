// A caching allocator over any memory backend: the host's aligned_alloc today, cudaMalloc for the
// CUDA backend. A training step allocates the same sizes every time, so a freed block is kept and
// handed to the next request of the same (rounded) size: after the first step there are no
// backend allocations at all, which on a GPU means no cudaMalloc/cudaFree (each one synchronizes
// the device) and on the CPU no page faults.
// Stream-aware: a block freed by work on stream S is only reused on S, where stream order makes
// reuse safe without synchronization. (Cross-stream reuse would need an event per block.)
// Private pools (for CUDA graphs, like PyTorch's graph pools): while a stream is routed into a
// pool, its allocations come only from that pool's blocks or from the backend, and those blocks
// return to the pool when freed, never to the shared cache: a captured graph keeps using their
// addresses in every replay, so no allocation outside it may ever be handed one. They stay
// reserved until the pool is released. Nothing is returned to the backend while any stream is
// routed (cudaFree during capture would invalidate it).
// Thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace cg {

struct MemoryBackend {
  std::string name;                            // "host", "cuda:0": for error messages
  std::function<void*(size_t bytes)> allocate;  // nullptr when out of memory
  std::function<void(void* ptr)> release;
};

struct AllocatorStats {
  size_t in_use_bytes = 0;
  size_t cached_bytes = 0;
  size_t peak_in_use_bytes = 0;
  size_t backend_allocations = 0;  // calls that reached the backend
  size_t backend_releases = 0;
};

using PoolId = uint64_t;  // 0: the shared cache

struct PoolStats {
  size_t in_use_bytes = 0;    // the pool's blocks currently allocated
  size_t reserved_bytes = 0;  // in use + kept for the pool's next capture
};

class CachingAllocator {
 public:
  // max_cached_bytes: above it, freed blocks go back to the backend instead of the cache.
  CachingAllocator(MemoryBackend backend, size_t max_cached_bytes);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Throws cg::Error naming the backend, the size and the usage when memory is exhausted even
  // after emptying the cache.
  void* allocate(size_t bytes, uint64_t stream = 0);
  void free(void* ptr);
  void empty_cache();  // the shared cache only: private pools keep their blocks
  AllocatorStats stats() const;  // all blocks, private pools' included
  void reset_peak();  // peak_in_use_bytes = in_use_bytes: measure the peak of what follows

  // Private pools (engine/capture_pool.h wraps these in RAII types).
  PoolId create_pool();
  // Until unroute_stream(stream), allocate(..., stream) is served from `pool`. One pool per
  // stream at a time.
  void route_stream(uint64_t stream, PoolId pool);
  void unroute_stream(uint64_t stream);
  // The pool's free blocks go back to the backend; its blocks still in use join the shared cache
  // of their stream when freed (the graph that needed them exclusively is gone by then).
  void release_pool(PoolId pool);
  PoolStats pool_stats(PoolId pool) const;
  // The pool a live block was allocated from (0: the shared cache); for checks and tests.
  PoolId pool_of(const void* ptr) const;

  // Requests are rounded up to this granularity, so slightly different sizes share blocks.
  static size_t round_size(size_t bytes);

 private:
  struct Block {
    size_t size;
    uint64_t stream;
    PoolId pool;
  };
  struct Pool {
    PoolStats stats;
    bool released = false;
  };
  using CacheKey = std::tuple<PoolId, uint64_t, size_t>;  // (pool, stream, size)
  void* take_cached_locked(const CacheKey& key);
  void release_cached_locked(PoolId pool);
  Pool& pool_locked(PoolId pool, const char* what);

  MemoryBackend backend_;
  size_t max_cached_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::map<CacheKey, std::vector<void*>> cached_;
  std::unordered_map<uint64_t, PoolId> routed_;  // stream -> pool
  std::map<PoolId, Pool> pools_;                 // private pools not yet released, or with live blocks
  PoolId next_pool_ = 1;
  AllocatorStats stats_;
};

}  // namespace cg
