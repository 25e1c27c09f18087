// The device's nanosecond clock (%globaltimer), comparable across the SMs of a GPU. The emulated
// GPU has no PTX: there its header gives the host's steady clock under another name.
#pragma once
#include <cstdint>

namespace cg::kernels::cuda {

__device__ __forceinline__ uint64_t global_timer_ns() {
#ifdef CUDAGRAD_GPU_EMULATION
  return __cg_global_timer_ns();
#else
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

}  // namespace cg::kernels::cuda
