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
// A device's shared memory holds garbage when a block starts, where this one would hold the
// previous block's values, so a kernel that reads a slot before any thread of the block wrote it
// could pass here by luck. The first thread of each block to reach the declaration fills the
// array with 0xFF bytes (NaN as a float or double, -1 as an integer), so such a read shows in the
// results.
#define CG_SHARED(type, name, dims)                    \
  static thread_local type name dims;                  \
  static thread_local uint64_t name##_poisoned_at = 0; \
  ::cg_emu::poison_once_per_block(&name, sizeof(name), name##_poisoned_at)

namespace cg::kernels::cuda {

template <typename... Params, typename... Args>
void start_grid(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                cudaStream_t stream, Args&&... args) {
  ::cg_emu::launch(kernel, name, grid, block, shared_bytes, stream)(std::forward<Args>(args)...);
}

}  // namespace cg::kernels::cuda
