// The CUDA runtime's memory calls on the emulated device. Device memory is host memory, handed
// out 256-byte aligned like cudaMalloc's and filled with 0xFF bytes (NaN in every float type), so
// a kernel that reads what nobody wrote sees NaN instead of a convenient zero. Copies check that
// their device side lies inside an allocation; pageable host memory behaves as CUDA documents it
// (a copy from it is staged at the call, a copy to it completes before the call returns).
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "emulator/device.h"

using namespace cg_emu;

namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kDeviceBytes = size_t(80) << 30;  // what the device reports; host memory is the real limit

struct Allocations {
  std::map<uintptr_t, size_t> device, pinned;
  size_t device_bytes = 0;
};
Allocations& allocations() {
  static Allocations* a = new Allocations;
  return *a;
}

bool inside(const std::map<uintptr_t, size_t>& m, const void* p, size_t bytes) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(u);
  if (it == m.begin()) return false;
  --it;
  return u >= it->first && u + bytes <= it->first + it->second;
}

void* aligned(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, bytes == 0 ? kAlignment : bytes) != 0) return nullptr;
  return p;
}

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  CG_EMU_STICKY;
  if (bytes == 0) return cudaSuccess;
  const Memory from = memory_kind(src, bytes), to = memory_kind(dst, bytes);
  const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  // A "device" side must be device memory (or mapped pinned memory, which kernels also use).
  if ((device_src && from == Memory::pageable) || (device_dst && to == Memory::pageable))
    return fail(cudaErrorInvalidValue);
  CUstream_st* s = resolve(stream);
  if (from == Memory::pageable) {  // staged now: the caller may reuse its buffer on return
    if (s->capture) {
      s->capture->invalidated = cudaErrorStreamCaptureUnsupported;
      return fail(cudaErrorStreamCaptureUnsupported);
    }
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + bytes);
    return enqueue(s, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  }
  const cudaError_t e = enqueue(s, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  if (e != cudaSuccess || to != Memory::pageable) return e;
  if (s->capture) {  // a copy to pageable memory is synchronous: not allowed in a capture
    s->capture->invalidated = cudaErrorStreamCaptureUnsupported;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  drive(s, s->submitted);
  return sticky_error();
}

}  // namespace

namespace cg_emu {

Memory memory_kind(const void* p, size_t bytes) {
  const Allocations& a = allocations();
  if (inside(a.device, p, bytes)) return Memory::device;
  if (inside(a.pinned, p, bytes)) return Memory::pinned;
  return Memory::pageable;
}

}  // namespace cg_emu

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  Allocations& a = allocations();
  *ptr = nullptr;
  if (a.device_bytes + bytes > kDeviceBytes) return fail(cudaErrorMemoryAllocation);
  void* p = aligned(bytes);
  if (!p) return fail(cudaErrorMemoryAllocation);
  std::memset(p, 0xFF, bytes);
  a.device[reinterpret_cast<uintptr_t>(p)] = bytes == 0 ? kAlignment : bytes;
  a.device_bytes += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t) { return cudaMalloc(ptr, bytes); }

cudaError_t cudaFree(void* ptr) {
  CG_EMU_LOCK;
  if (!ptr) return cudaSuccess;
  Allocations& a = allocations();
  auto it = a.device.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == a.device.end()) return fail(cudaErrorInvalidValue);
  drive_all();  // cudaFree synchronizes: queued work may still use the memory
  a.device_bytes -= it->second;
  a.device.erase(it);
  std::free(ptr);
  return sticky_error();
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int /*flags*/) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  void* p = aligned(bytes);
  if (!p) return fail(cudaErrorMemoryAllocation);
  allocations().pinned[reinterpret_cast<uintptr_t>(p)] = bytes == 0 ? kAlignment : bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void* ptr) {
  CG_EMU_LOCK;
  if (!ptr) return cudaSuccess;
  auto& pinned = allocations().pinned;
  auto it = pinned.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == pinned.end()) return fail(cudaErrorInvalidValue);
  drive_all();
  pinned.erase(it);
  std::free(ptr);
  return sticky_error();
}

cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int /*flags*/) {
  *device = host;  // unified addressing: the mapped host pointer is the device pointer
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  CG_EMU_LOCK;
  return copy(dst, src, bytes, kind, stream);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  CG_EMU_LOCK;
  const cudaError_t e = copy(dst, src, bytes, kind, nullptr);
  if (e != cudaSuccess) return e;
  CUstream_st* legacy = resolve(nullptr);
  drive(legacy, legacy->submitted);
  return sticky_error();
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  if (bytes == 0) return cudaSuccess;
  if (memory_kind(ptr, bytes) == Memory::pageable) return fail(cudaErrorInvalidValue);
  return enqueue(resolve(stream), [ptr, value, bytes] { std::memset(ptr, value, bytes); });
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  CG_EMU_LOCK;
  *total = kDeviceBytes;
  *free = kDeviceBytes - allocations().device_bytes;
  return cudaSuccess;
}

}  // extern "C"
