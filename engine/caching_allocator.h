// A caching allocator over any memory backend: the host's aligned_alloc today, cudaMalloc for the
// CUDA backend. A training step allocates the same sizes every time, so a freed block is kept and
// handed to the next request of the same (rounded) size: after the first step there are no
// backend allocations at all, which on a GPU means no cudaMalloc/cudaFree (each one synchronizes
// the device) and on the CPU no page faults.
// Stream-aware: a block freed by work on stream S is only reused on S, where stream order makes
// reuse safe without synchronization. (Cross-stream reuse would need an event per block.)
// Thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
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
  void empty_cache();
  AllocatorStats stats() const;
  void reset_peak();  // peak_in_use_bytes = in_use_bytes: measure the peak of what follows

  // Requests are rounded up to this granularity, so slightly different sizes share blocks.
  static size_t round_size(size_t bytes);

 private:
  struct Block {
    size_t size;
    uint64_t stream;
  };
  void release_cached_locked();

  MemoryBackend backend_;
  size_t max_cached_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::map<std::pair<uint64_t, size_t>, std::vector<void*>> cached_;  // (stream, size) -> blocks
  AllocatorStats stats_;
};

}  // namespace cg
