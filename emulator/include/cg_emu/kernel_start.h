// The emulated build's versions of the two primitives under kernels/cuda/launch.h (which
// includes this header when CUDAGRAD_GPU_EMULATION is defined): start_grid queues the grid on the
// emulated stream (cg_emu/launch.h), and CG_SHARED declares a block's shared array poisoned for
// each block. The kernel sources name neither: they call launch_kernel and CG_SHARED.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cg_emu/grid.h"
#include "cg_emu/launch.h"

// Shared memory is one copy per block: a block runs on one host thread at a time, and a host
// thread runs one block at a time, so a function-local static per host thread is exactly that.
// The array sits between two guard zones in one struct, and the first thread of each block to
// reach the declaration poisons it (0xFF bytes: NaN as a float or double, -1 as an integer, so a
// read of a slot no thread of the block wrote shows in the results) and registers it for the
// checks of emulator/shared_checker.h: bounds, and races between barriers. `name` is a reference
// to the array, so the kernel uses it as it would the device's.
#define CG_SHARED(type, name, dims)                                                                     \
  static thread_local struct alignas(256) {                                                             \
    unsigned char before[::cg_emu::kSharedGuardBytes];                                                  \
    type value dims;                                                                                    \
    unsigned char after[::cg_emu::kSharedGuardBytes];                                                   \
  } name##_guarded;                                                                                     \
  static thread_local uint64_t name##_reached_at = 0;                                                   \
  auto& name = name##_guarded.value;                                                                    \
  ::cg_emu::shared_array_reached(#name, &name, sizeof(name), name##_guarded.before,                     \
                                 name##_guarded.after + ::cg_emu::kSharedGuardBytes, name##_reached_at)

namespace cg::kernels::cuda {

template <typename... Params, typename... Args>
void start_grid(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                cudaStream_t stream, Args&&... args) {
  ::cg_emu::launch(kernel, name, grid, block, shared_bytes, stream)(std::forward<Args>(args)...);
}

}  // namespace cg::kernels::cuda
