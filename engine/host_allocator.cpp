#include "engine/host_allocator.h"

#include <cstdlib>

namespace cg {

CachingAllocator& host_allocator() {
  // Never destroyed: tensors may outlive static destructors.
  static CachingAllocator* allocator = new CachingAllocator(
      MemoryBackend{"host", [](size_t n) { return std::aligned_alloc(64, n); }, [](void* p) { std::free(p); }},
      size_t(4) << 30);
  return *allocator;
}

}  // namespace cg
