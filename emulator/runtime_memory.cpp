// The CUDA runtime's memory calls on the emulated device. Device memory is host memory, handed
// out 256-byte aligned like cudaMalloc's and filled with 0xFF bytes (NaN in every float type), so
// a kernel that reads what nobody wrote sees NaN instead of a convenient zero. Copies check that
// their device side lies inside an allocation; pageable host memory behaves as CUDA documents it
// (a copy from it is staged at the call, a copy to it completes before the call returns).
// Each device allocation sits between two guard zones of kGuard bytes holding kGuardByte: after
// every kernel and at cudaFree they are checked, and a kernel that wrote into one faults, naming
// the allocation and how far outside it wrote (what compute-sanitizer's memcheck reports on a
// device; the engine's caching allocator hands out whole blocks, so a tensor's overrun reaches
// the guard once it passes the block's rounded size).
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "emulator/device.h"

using namespace cg_emu;

namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kDeviceBytes = size_t(80) << 30;  // what the device reports; host memory is the real limit
constexpr size_t kGuard = kAlignment;  // a whole alignment unit, so the allocation stays aligned
constexpr unsigned char kGuardByte = 0xC5;

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

// The first and last damaged byte of the guard zone [zone, zone + kGuard), or {-1, -1}.
std::pair<long, long> damage(const unsigned char* zone) {
  long first = -1, last = -1;
  for (size_t i = 0; i < kGuard; ++i)
    if (zone[i] != kGuardByte) {
      if (first < 0) first = long(i);
      last = long(i);
    }
  return {first, last};
}

// Under AddressSanitizer (scripts/sanitize.sh emu) the guard zones are poisoned instead: any access
// to them, a read too, is reported where it happens.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsanGuards = true;
#else
constexpr bool kAsanGuards = false;
#endif
void set_guards_poisoned([[maybe_unused]] unsigned char* user, [[maybe_unused]] size_t bytes,
                         [[maybe_unused]] bool poisoned) {
#if defined(__SANITIZE_ADDRESS__)
  if (poisoned) {
    ASAN_POISON_MEMORY_REGION(user - kGuard, kGuard);
    ASAN_POISON_MEMORY_REGION(user + bytes, kGuard);
  } else {
    ASAN_UNPOISON_MEMORY_REGION(user - kGuard, kGuard);
    ASAN_UNPOISON_MEMORY_REGION(user + bytes, kGuard);
  }
#endif
}

// "" when both guards of the allocation at p (`bytes` long) are intact, else what was written where.
std::string guard_report(uintptr_t p, size_t bytes) {
  if constexpr (kAsanGuards) return "";
  const auto* user = reinterpret_cast<const unsigned char*>(p);
  const auto [before_first, before_last] = damage(user - kGuard);
  const auto [after_first, after_last] = damage(user + bytes);
  // Distances from the allocation's edge, nearest first: "byte 0" is the first one past the end.
  auto bytes_from = [](long near, long far) {
    return near == far ? fmt::format("byte {}", near) : fmt::format("bytes {} to {}", near, far);
  };
  std::string report;
  if (before_first >= 0)
    report += bytes_from(long(kGuard) - 1 - before_last, long(kGuard) - 1 - before_first) + " before the start";
  if (after_first >= 0) report += (report.empty() ? "" : " and ") + bytes_from(after_first, after_last) + " past the end";
  if (report.empty()) return report;
  return fmt::format("{} of the {}-byte device allocation at {} were written", report, bytes, static_cast<const void*>(user));
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

std::string damaged_guards() {
  for (const auto& [p, bytes] : allocations().device)
    if (std::string report = guard_report(p, bytes); !report.empty()) return report;
  return "";
}

std::vector<std::pair<uintptr_t, size_t>> device_allocations() {
  const auto& device = allocations().device;
  return {device.begin(), device.end()};
}

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
  const size_t size = bytes == 0 ? kAlignment : bytes;
  auto* base = static_cast<unsigned char*>(aligned(kGuard + size + kGuard));
  if (!base) return fail(cudaErrorMemoryAllocation);
  unsigned char* p = base + kGuard;
  std::memset(base, kGuardByte, kGuard);
  std::memset(p, 0xFF, size);
  std::memset(p + size, kGuardByte, kGuard);
  set_guards_poisoned(p, size, true);
  a.device[reinterpret_cast<uintptr_t>(p)] = size;
  a.device_bytes += size;
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
  // A kernel's overrun is caught when it ends; a copy's (or a host write through a mapped pointer)
  // shows here at the latest.
  if (const std::string damaged = guard_report(it->first, it->second); !damaged.empty())
    set_sticky(cudaErrorIllegalAddress, "cudaFree: " + damaged);
  a.device_bytes -= it->second;
  set_guards_poisoned(static_cast<unsigned char*>(ptr), it->second, false);
  a.device.erase(it);
  std::free(static_cast<unsigned char*>(ptr) - kGuard);
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
  count_host_wait();
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
