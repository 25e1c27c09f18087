// How the kernels under kernels/cuda start a grid and declare shared memory; nothing else there
// writes <<<...>>> or __shared__ (tests/scripts/kernel_hooks_test.py checks):
//
//   launch_kernel(kernel, "name", grid, block, shared_bytes, stream, args...);
//     kernel<<<grid, block, shared_bytes, stream>>>(args...), then the launch checked
//     (cuda_after_launch: the launch error, and with CUDAGRAD_CUDA_SYNC=1 the execution error),
//     a failure naming "name" and the caller's file:line.
//   CG_SHARED(type, name, dims);
//     a block's shared array, `__shared__ type name dims`.
//
// The two primitives under them, start_grid and CG_SHARED, are the device's below. The emulated
// build (cmake/Emulation.cmake defines CUDAGRAD_GPU_EMULATION and puts emulator/include on the
// path) takes its own from cg_emu/kernel_start.h: a grid queued on the emulated stream, and a
// shared array filled with garbage for each block, as a device's is when a block starts.
// Include only from .cu/.cuh files.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda/check.h"

namespace cg::kernels::cuda {

// A kernel's name for error messages, with the file:line of the launch that gave it: the default
// arguments are evaluated where the caller's string converts, at its launch_kernel call.
struct KernelName {
  KernelName(const char* text, const char* file = __builtin_FILE(), int line = __builtin_LINE())
      : text(text), file(file), line(line) {}
  const char* text;
  const char* file;
  int line;
};

}  // namespace cg::kernels::cuda

#ifdef CUDAGRAD_GPU_EMULATION
#include "cg_emu/kernel_start.h"
#else
#define CG_SHARED(type, name, dims) __shared__ type name dims

namespace cg::kernels::cuda {

template <typename... Params, typename... Args>
void start_grid(void (*kernel)(Params...), const char* /*name*/, dim3 grid, dim3 block, size_t shared_bytes,
                cudaStream_t stream, Args&&... args) {
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
}

}  // namespace cg::kernels::cuda
#endif

namespace cg::kernels::cuda {

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), KernelName name, dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  start_grid(kernel, name.text, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
  cuda_after_launch(name.text, name.file, name.line);
}

}  // namespace cg::kernels::cuda
