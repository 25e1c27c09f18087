#include "engine/device_copy.h"

#include <cstring>

#include "kernels/backend.h"
#include "kernels/cuda/device_error.h"
#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg {
namespace {

namespace cu = kernels::cuda;

// A copy or fill that involves a device, in a build without the CUDA backend: no tensor can be on
// a CUDA device there, so only a bug reaches this.
void check_cuda_build(const char* what) { CG_CHECK(kernels::kCudaBuild, "{}: {}", what, kernels::kNoCudaBackend); }

// Host to device, device to host, or within one device; nothing without the CUDA backend, where
// check_cuda_build refused first.
void copy_with_device(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if constexpr (!kernels::kCudaBuild) return;
  else if (dst_device.is_cuda() && src_device.is_cpu()) {
    const Stream s = current_stream(dst_device);
    cu::copy_host_to_device(dst, src, bytes, s.handle());
    s.synchronize();  // src may be pageable host memory the caller reuses at once
  } else if (dst_device.is_cpu() && src_device.is_cuda()) {
    const Stream s = current_stream(src_device);
    cu::copy_device_to_host(dst, src, bytes, s.handle());
    s.synchronize();  // the host reads dst next
    cu::raise_device_error();  // what a kernel found (a bad label) before the host uses dst
  } else {
    CG_CHECK(dst_device == src_device, "copy between {} and {} needs peer access, not supported",
             src_device.str(), dst_device.str());
    cu::copy_device_to_device(dst, src, bytes, current_stream(dst_device).handle());
  }
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  check_cuda_build("copy_bytes");
  copy_with_device(dst, dst_device, src, src_device, bytes);
}

void copy_bytes_async(void* dst, const void* pinned_src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  check_cuda_build("copy_bytes_async");
  if constexpr (kernels::kCudaBuild) cu::copy_host_to_device(dst, pinned_src, bytes, stream.handle());
}

void copy_to_host_async(void* pinned_dst, const void* src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  check_cuda_build("copy_to_host_async");
  if constexpr (kernels::kCudaBuild) cu::copy_device_to_host(pinned_dst, src, bytes, stream.handle());
}

void zero_bytes(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
  check_cuda_build("zero_bytes");
  if constexpr (kernels::kCudaBuild) cu::zero_device(dst, bytes, current_stream(device).handle());
}

}  // namespace cg
