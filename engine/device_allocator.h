// Which caching allocator serves a device: the host one for the CPU, one per GPU for CUDA
// devices (over cudaMalloc). A build without CUDA fails clearly when asked for a CUDA device.
#pragma once
#include "engine/caching_allocator.h"
#include "engine/device.h"

namespace cg {

CachingAllocator& allocator_for(Device device);

}  // namespace cg
