#include "engine/device_allocator.h"

#include <array>
#include <memory>
#include <mutex>

#include "engine/host_allocator.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg {

// Every tensor's memory comes from here, so this is where a build without the CUDA backend refuses
// a CUDA device, naming the cause; the GPU half is discarded there (kernels/backend.h).
CachingAllocator& allocator_for(Device device) {
  if (device.is_cpu()) return host_allocator();
  CG_CHECK(kernels::kCudaBuild, "{}: {}", device.str(), kernels::kNoCudaBackend);
  if constexpr (kernels::kCudaBuild) {
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
  } else {
    return host_allocator();  // not reached: the check refused
  }
}

}  // namespace cg
