// The per-access hook of the emulated kernels. In the emulated build the kernel sources are
// compiled with g++'s thread-sanitizer instrumentation (cmake/Emulation.cmake), which puts a call
// before every load and store and turns every atomic into a call; the sanitizer's runtime is not
// linked: these definitions take its place. A plain access goes to shared_checker.h (races and
// bounds of shared arrays, checked only inside a kernel) and, while a recording is open, to
// traffic_counter.h (global memory, per launch); an atomic is performed here, as the
// instruction it replaced would have been (sequentially consistent whatever order was asked: the
// strongest, and the emulated device promises no weaker). Nothing else of the sanitizer's
// interface is used: a symbol the instrumentation asks for and this file lacks fails the link.
#include <cstddef>
#include <cstdint>

#include "emulator/shared_checker.h"
#include "emulator/traffic_counter.h"

namespace {

// Every plain access: shared memory is checked, global memory counted while a recording is open.
inline void plain_access(const void* p, size_t bytes, bool write) {
  cg_emu::shared_access(p, bytes, write);
  if (cg_emu::traffic_recording()) cg_emu::traffic_access(p, bytes, write);
}

}  // namespace

extern "C" {

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define CG_EMU_PLAIN_ACCESS(bytes)                                                                            \
  void __tsan_read##bytes(void* p) { plain_access(p, bytes, false); }                                      \
  void __tsan_write##bytes(void* p) { plain_access(p, bytes, true); }                                      \
  void __tsan_unaligned_read##bytes(void* p) { plain_access(p, bytes, false); }                            \
  void __tsan_unaligned_write##bytes(void* p) { plain_access(p, bytes, true); }                            \
  void __tsan_volatile_read##bytes(void* p) { plain_access(p, bytes, false); }                             \
  void __tsan_volatile_write##bytes(void* p) { plain_access(p, bytes, true); }                             \
  void __tsan_unaligned_volatile_read##bytes(void* p) { plain_access(p, bytes, false); }                   \
  void __tsan_unaligned_volatile_write##bytes(void* p) { plain_access(p, bytes, true); }
CG_EMU_PLAIN_ACCESS(1)
CG_EMU_PLAIN_ACCESS(2)
CG_EMU_PLAIN_ACCESS(4)
CG_EMU_PLAIN_ACCESS(8)
CG_EMU_PLAIN_ACCESS(16)
#undef CG_EMU_PLAIN_ACCESS

void __tsan_read_range(void* p, size_t bytes) { plain_access(p, bytes, false); }
void __tsan_write_range(void* p, size_t bytes) { plain_access(p, bytes, true); }

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#define CG_EMU_ATOMIC_OP(bits, T, op)                                 \
  T __tsan_atomic##bits##_##op(volatile T* a, T v, int) {             \
    return __atomic_##op(a, v, __ATOMIC_SEQ_CST);                     \
  }
#define CG_EMU_ATOMICS(bits, T)                                                                        \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  CG_EMU_ATOMIC_OP(bits, T, fetch_add)                                                                 \
  CG_EMU_ATOMIC_OP(bits, T, fetch_sub)                                                                 \
  CG_EMU_ATOMIC_OP(bits, T, fetch_and)                                                                 \
  CG_EMU_ATOMIC_OP(bits, T, fetch_or)                                                                  \
  CG_EMU_ATOMIC_OP(bits, T, fetch_xor)                                                                 \
  CG_EMU_ATOMIC_OP(bits, T, fetch_nand)                                                                \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* expected, T v, int, int) {        \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);      \
  }                                                                                                    \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* expected, T v, int, int) {          \
    return __atomic_compare_exchange_n(a, expected, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);       \
  }                                                                                                    \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T expected, T v, int, int) {              \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);            \
    return expected;                                                                                   \
  }
CG_EMU_ATOMICS(8, int8_t)
CG_EMU_ATOMICS(16, int16_t)
CG_EMU_ATOMICS(32, int32_t)
CG_EMU_ATOMICS(64, int64_t)
#undef CG_EMU_ATOMICS
#undef CG_EMU_ATOMIC_OP

}  // extern "C"
