#include "engine/device_allocator.h"

#include <array>
#include <memory>
#include <mutex>

#include "engine/host_allocator.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg {

CachingAllocator& allocator_for(Device device) {
  if (device.is_cpu()) return host_allocator();
  constexpr int kMaxDevices = 16;
  static std::array<CachingAllocator*, kMaxDevices> allocators{};  // never destroyed, like the host one
  static std::mutex mutex;
  const int index = device.index;
  CG_CHECK(index >= 0 && index < kMaxDevices && index < kernels::cuda::device_count(),
           "no CUDA device {} ({} visible)", device.str(), kernels::cuda::device_count());
  std::lock_guard<std::mutex> lock(mutex);
  if (!allocators[size_t(index)]) {
    allocators[size_t(index)] = new CachingAllocator(
        MemoryBackend{device.str(), [index](size_t n) { return kernels::cuda::device_malloc(n, index); },
                      [index](void* p) { kernels::cuda::device_free(p, index); }},
        SIZE_MAX);  // GPU memory stays cached, as in PyTorch; empty_cache() returns it
  }
  return *allocators[size_t(index)];
}

}  // namespace cg
