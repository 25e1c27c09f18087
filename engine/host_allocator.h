// Host (CPU) tensor memory: the caching allocator over 64-byte-aligned aligned_alloc, so that
// AVX-512 loads never straddle cache lines and recurring activation sizes cost no page faults.
#pragma once
#include <cstddef>

#include "engine/caching_allocator.h"

namespace cg {

CachingAllocator& host_allocator();

}  // namespace cg
