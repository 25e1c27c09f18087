#include <atomic>
#include <cstring>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_error.h"

namespace cg::kernels::cuda {
namespace {
std::atomic<DeviceErrorRecord*> made{nullptr};

std::string describe(const DeviceErrorRecord& r) {
  switch (r.code) {
    case kLabelOutOfRange:
      return fmt::format("cross_entropy: label {} at row {} outside [0, {}) (found by the GPU kernel)", r.value,
                         r.index, r.limit);
    default: return fmt::format("a GPU kernel reported error code {}", r.code);
  }
}
}  // namespace

DeviceErrorRecord* device_error_record() {
  static DeviceErrorRecord* const record = [] {
    void* p = nullptr;
    // Portable: visible to every device; mapped: kernels write it directly (unified addressing
    // makes the host pointer a device pointer too).
    CG_CUDA_CHECK(cudaHostAlloc(&p, sizeof(DeviceErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(p, 0, sizeof(DeviceErrorRecord));
    auto* r = static_cast<DeviceErrorRecord*>(p);
    made.store(r, std::memory_order_release);
    return r;
  }();
  return record;
}

void raise_device_error() {
  DeviceErrorRecord* r = made.load(std::memory_order_acquire);
  if (r == nullptr) return;
  const int32_t code = reinterpret_cast<volatile int32_t&>(r->code);
  if (code == kNoDeviceError) return;
  std::atomic_thread_fence(std::memory_order_acquire);
  DeviceErrorRecord seen = *r;
  seen.code = code;
  reinterpret_cast<volatile int32_t&>(r->code) = kNoDeviceError;  // reported once
  reinterpret_cast<volatile int32_t&>(r->claimed) = 0;
  throw Error(describe(seen));
}

}  // namespace cg::kernels::cuda
