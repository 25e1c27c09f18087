// One check macro per CUDA library, sharing one formatter (file:line, the expression, the
// library's message): the throwing CG_CUDA_CHECK for normal code and a print-only variant for
// destructors. With CUDAGRAD_CUDA_SYNC=1 in the environment, cuda_after_launch() synchronizes after
// every kernel so an asynchronous fault points at the launch that caused it.
// Include only from .cu files and CUDA-only sources.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <string>

#include "util/check.h"

namespace cg::kernels::cuda {

[[noreturn]] inline void fail_call(const char* library, const char* expr, const std::string& message,
                                   const char* file, int line) {
  throw Error(fmt::format("{} call failed: {}: {} ({}:{})", library, expr, message, file, line));
}

// After a kernel launch: the launch error now, and with CUDAGRAD_CUDA_SYNC=1 the execution error.
// Called by launch_kernel (kernels/cuda/launch.h) after every launch, and only there.
void cuda_after_launch(const char* kernel, const char* file, int line);

}  // namespace cg::kernels::cuda

#define CG_CUDA_CHECK(expr)                                                                      \
  do {                                                                                           \
    const cudaError_t cg_err_ = (expr);                                                          \
    if (cg_err_ != cudaSuccess)                                                                  \
      ::cg::kernels::cuda::fail_call("CUDA", #expr, cudaGetErrorString(cg_err_), __FILE__, __LINE__); \
  } while (0)

// A result already held in a variable (looked at before checking), reported under the name of
// the call that gave it: CG_CUDA_CHECK(ended) would name the variable.
#define CG_CUDA_CHECK_RESULT(err, call)                                                          \
  do {                                                                                           \
    const cudaError_t cg_err_ = (err);                                                           \
    if (cg_err_ != cudaSuccess)                                                                  \
      ::cg::kernels::cuda::fail_call("CUDA", call, cudaGetErrorString(cg_err_), __FILE__, __LINE__); \
  } while (0)

// For destructors, which must not throw: report and go on.
#define CG_CUDA_CHECK_NOTHROW(expr)                                                              \
  do {                                                                                           \
    const cudaError_t cg_err_ = (expr);                                                          \
    if (cg_err_ != cudaSuccess)                                                                  \
      std::fprintf(stderr, "CUDA call failed: %s: %s (%s:%d)\n", #expr, cudaGetErrorString(cg_err_), \
                   __FILE__, __LINE__);                                                          \
  } while (0)

namespace cg::kernels::cuda {

// The calling thread's slot for a library handle (cuDNN's, cuBLAS's) on the current device,
// null until the caller creates one. One per thread and device: a handle is bound to one stream
// at a time, so threads issuing work concurrently (ranks as threads in tests) must not share
// one. Handles live until exit, like the allocators.
template <typename Handle>
Handle& thread_handle_slot(const char* library) {
  constexpr int kMaxDevices = 16;
  thread_local std::array<Handle, kMaxDevices> handles{};
  int device = 0;
  CG_CUDA_CHECK(cudaGetDevice(&device));
  CG_CHECK(device >= 0 && device < kMaxDevices, "{}: device {} out of range", library, device);
  return handles[size_t(device)];
}

}  // namespace cg::kernels::cuda
