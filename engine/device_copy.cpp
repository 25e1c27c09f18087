#include "engine/device_copy.h"

#include <cstring>

#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  namespace cu = kernels::cuda;
  if (dst_device.is_cuda() && src_device.is_cpu()) {
    cu::copy_host_to_device(dst, src, bytes, nullptr);
    cu::synchronize_stream(nullptr);  // src may be pageable host memory the caller reuses at once
  } else if (dst_device.is_cpu() && src_device.is_cuda()) {
    cu::copy_device_to_host(dst, src, bytes, nullptr);
    cu::synchronize_stream(nullptr);  // the host reads dst next
  } else {
    CG_CHECK(dst_device == src_device, "copy between {} and {} needs peer access, not supported",
             src_device.str(), dst_device.str());
    cu::copy_device_to_device(dst, src, bytes, nullptr);
  }
}

void zero_bytes(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
  kernels::cuda::zero_device(dst, bytes, nullptr);
}

}  // namespace cg
