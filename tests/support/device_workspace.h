// Scratch memory for kernel tests that call CUDA kernel functions directly (the engine serves it
// from its caching allocator; tests of the kernels layer have no engine). One block per process,
// grown when a call asks for more; growing waits for the device first, since earlier kernels may
// still use the old block. Kernel functions ask at most once per call, so one block suffices.
#pragma once
#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg::test {

inline kernels::cuda::WorkspaceFn device_workspace(int device = 0) {
  return [device](size_t bytes) -> void* {
    static void* block = nullptr;
    static size_t size = 0;
    if (bytes > size) {
      if (block) {
        kernels::cuda::synchronize_device(device);
        kernels::cuda::device_free(block, device);
      }
      block = kernels::cuda::device_malloc(bytes, device);
      CG_CHECK(block != nullptr, "test workspace: {} bytes of device memory not available", bytes);
      size = bytes;
    }
    return block;
  };
}

}  // namespace cg::test
