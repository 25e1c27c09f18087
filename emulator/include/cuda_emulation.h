// Force-included (g++ -include) ahead of every kernels/cuda source in the emulated build
// (-DCUDAGRAD_GPU_EMULATION=ON): the CUDA toolkit's own headers give the types (dim3, __half and
// its host arithmetic, the runtime's declarations, which emulator/runtime_*.cpp define), and this
// header gives what only a device has: the thread coordinates, barriers, warp shuffles, atomics.
// A launch and a block's shared array are the kernels' own (kernels/cuda/launch.h), which take
// the emulated versions from cg_emu/kernel_start.h.
#pragma once

// Shared memory is one copy per block: a block runs on one host thread at a time, and a host
// thread runs one block at a time, so a function-local static per host thread is exactly that.
// Defined before cuda_runtime.h, which then keeps this definition.
#define __shared__ static thread_local

#include <cuda_runtime.h>

// An occupancy hint for nvcc; nothing to do with the emulated device's threads.
#undef __launch_bounds__
#define __launch_bounds__(...)

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cg_emu/grid.h"

#define threadIdx (::cg_emu::current_thread()->thread_idx)
#define blockIdx (::cg_emu::current_thread()->block_idx)
#define blockDim (::cg_emu::current_thread()->block_dim)
#define gridDim (::cg_emu::current_thread()->grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads() { ::cg_emu::block_barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cg_emu::warp_barrier(mask); }

namespace cg_emu {
// The shuffles' common body: every lane of `mask` puts its value in the warp's slots, they meet,
// each reads lane `source`'s, and they meet again before the slots can be reused. Reading a lane
// outside the mask is a fault (the lane gets its own value, and the launch fails): a device gives an
// undefined value there, which the emulator's lockstep would otherwise hide by handing over
// whatever that lane last left in its slot.
inline int lane_id() { return current_thread()->linear % 32; }

template <typename T>
T shuffle(const char* op, unsigned mask, T value, int source) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>, "shuffles move values of up to 16 bytes");
  unsigned char* slots = warp_slots();
  const int lane = lane_id();
  std::memcpy(slots + 16 * lane, &value, sizeof(T));
  warp_barrier(mask);
  T result = value;
  if (mask >> source & 1u) {
    std::memcpy(&result, slots + 16 * source, sizeof(T));
  } else {
    char text[128];
    std::snprintf(text, sizeof text, "%s: lane %d reads lane %d, outside the mask 0x%08x", op, lane, source, mask);
    report_kernel_fault(text);
  }
  warp_barrier(mask);
  return result;
}
}  // namespace cg_emu

// The four shuffles as CUDA defines them for a width (a power of two up to 32) that cuts the warp
// into segments: a source outside the lane's segment gives the lane its own value (up, down, xor),
// and __shfl_sync's source lane is taken modulo the width.
template <typename T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = warpSize) {
  const int lane = ::cg_emu::lane_id();
  return ::cg_emu::shuffle("__shfl_sync", mask, value, (lane & ~(width - 1)) + (src_lane & (width - 1)));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  const int lane = ::cg_emu::lane_id(), source = lane - int(delta);
  return ::cg_emu::shuffle("__shfl_up_sync", mask, value, source < (lane & ~(width - 1)) ? lane : source);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  const int lane = ::cg_emu::lane_id(), source = lane + int(delta);
  return ::cg_emu::shuffle("__shfl_down_sync", mask, value, source >= (lane & ~(width - 1)) + width ? lane : source);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  const int lane = ::cg_emu::lane_id(), source = lane ^ lane_mask;
  return ::cg_emu::shuffle("__shfl_xor_sync", mask, value, source / width != lane / width ? lane : source);
}

// Atomics: blocks run on several host threads at once, so these are real atomic operations.
template <typename T>
T atomicOr(T* address, T value) {
  return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value, whether or not it was replaced
}
template <typename T>
T atomicExch(T* address, T value) {
  return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicAdd(T* address, T value) {
  if constexpr (std::is_integral_v<T>) {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
  } else {
    std::atomic_ref<T> a(*address);
    T old = a.load();
    while (!a.compare_exchange_weak(old, old + value)) {
    }
    return old;
  }
}
template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }

// The device's nanosecond timer (%globaltimer on a GPU).
inline uint64_t __cg_global_timer_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

template <typename T>
T __ldg(const T* p) {
  return *p;
}
// A load that skips L1 (device: ld.global.cg); the emulated blocks share one coherent memory.
template <typename T>
T __ldcg(const T* p) {
  return *p;
}

// Device math the host library spells the same way or does not have.
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __saturatef(float x) { return std::min(1.f, std::max(0.f, x)); }

// CUDA's min and max, overloaded for every arithmetic pair (mixed types meet in their common type).
template <typename A, typename B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  return T(b) < T(a) ? T(b) : T(a);
}
template <typename A, typename B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  return T(a) < T(b) ? T(b) : T(a);
}

// Bit casts the device library has (math_constants.h spells its constants with them).
inline double __longlong_as_double(long long v) { return std::bit_cast<double>(v); }
inline long long __double_as_longlong(double v) { return std::bit_cast<long long>(v); }
inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline int __float_as_int(float v) { return std::bit_cast<int>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }

// Device code calls these unqualified, as C does.
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;
