#include "engine/device_copy.h"

#include <cstring>

#include "kernels/cuda/device_error.h"
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
    const Stream s = current_stream(dst_device);
    cu::copy_host_to_device(dst, src, bytes, s.handle());
    s.synchronize();  // src may be pageable host memory the caller reuses at once
  } else if (dst_device.is_cpu() && src_device.is_cuda()) {
    const Stream s = current_stream(src_device);
    cu::copy_device_to_host(dst, src, bytes, s.handle());
    s.synchronize();  // the host reads dst next
    kernels::cuda::raise_device_error();  // what a kernel found (a bad label) before the host uses dst
  } else {
    CG_CHECK(dst_device == src_device, "copy between {} and {} needs peer access, not supported",
             src_device.str(), dst_device.str());
    cu::copy_device_to_device(dst, src, bytes, current_stream(dst_device).handle());
  }
}

void copy_bytes_async(void* dst, const void* pinned_src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  kernels::cuda::copy_host_to_device(dst, pinned_src, bytes, stream.handle());
}

void copy_to_host_async(void* pinned_dst, const void* src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  kernels::cuda::copy_device_to_host(pinned_dst, src, bytes, stream.handle());
}

void zero_bytes(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
  kernels::cuda::zero_device(dst, bytes, current_stream(device).handle());
}

}  // namespace cg
