#include "engine/capture_pool.h"

#include <cstdio>
#include <exception>

namespace cg {

CapturePool::CapturePool(CachingAllocator& allocator) : allocator_(allocator), id_(allocator.create_pool()) {}

CapturePool::~CapturePool() {
  try {
    allocator_.release_pool(id_);
  } catch (const std::exception& e) {  // a destructor must not throw; the memory stays reserved
    std::fprintf(stderr, "cudagrad: CapturePool: %s\n", e.what());
  }
}

CaptureScope::CaptureScope(CapturePool& pool, uint64_t stream) : allocator_(pool.allocator()), stream_(stream) {
  allocator_.route_stream(stream, pool.id());
}

CaptureScope::~CaptureScope() { allocator_.unroute_stream(stream_); }

}  // namespace cg
