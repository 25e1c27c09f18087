#include "engine/host_allocator.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "util/check.h"

namespace cg {
namespace {

// Above this much cached memory, freed blocks go straight back to the system.
constexpr size_t kMaxCachedBytes = size_t(4) << 30;

size_t round_up(size_t n) { return (n + 63) / 64 * 64; }

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by rounded size
  HostAllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors may outlive static destructors
  return *c;
}

}  // namespace

void* host_allocate(size_t nbytes) {
  const size_t size = round_up(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.in_use_bytes += size;
    c.stats.peak_in_use_bytes = std::max(c.stats.peak_in_use_bytes, c.stats.in_use_bytes);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= size;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, size);
  if (!p) {
    host_empty_cache();
    p = std::aligned_alloc(64, size);
  }
  if (!p) {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.in_use_bytes -= size;
    throw Error(fmt::format("out of host memory allocating {} bytes", nbytes));
  }
  return p;
}

void host_free(void* ptr, size_t nbytes) {
  if (!ptr) return;
  const size_t size = round_up(nbytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.in_use_bytes -= size;
  if (c.stats.cached_bytes + size > kMaxCachedBytes) {
    std::free(ptr);
    return;
  }
  c.free_blocks[size].push_back(ptr);
  c.stats.cached_bytes += size;
}

HostAllocatorStats host_allocator_stats() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().stats;
}

void host_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.stats.cached_bytes = 0;
}

}  // namespace cg
