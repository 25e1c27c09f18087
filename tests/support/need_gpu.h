// NEED_GPU(): the first line of every test that needs a CUDA device. Without one the test is
// skipped, saying so; with CUDAGRAD_REQUIRE_GPU=1 in the environment (the GPU check,
// scripts/gpu_check.sh, sets it) it fails instead, so a GPU machine whose device is not visible
// cannot pass by skipping everything.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/device_info.h"

namespace cg::test {

// Read at each use, so a test may set it for itself.
inline bool gpu_required() {
  const char* v = std::getenv("CUDAGRAD_REQUIRE_GPU");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// False in a build without the CUDA backend, which has no kernels/cuda to ask.
inline bool gpu_visible() {
  if constexpr (::cg::kernels::kCudaBuild) return ::cg::kernels::cuda::device_count() > 0;
  else return false;
}

// Whether the GPU is the emulated one (-DCUDAGRAD_GPU_EMULATION=ON), where a step costs seconds: a
// test whose large case takes minutes there runs a smaller one, the large case still running on a
// real GPU.
inline constexpr bool kEmulatedGpu = ::cg::kernels::kGpuEmulation;

}  // namespace cg::test

// Returns from the test (void function) when it cannot run.
#define NEED_GPU()                                                                          \
  do {                                                                                      \
    if (!::cg::test::gpu_visible()) {                                                       \
      if (::cg::test::gpu_required())                                                       \
        GTEST_FAIL() << "needs a CUDA GPU, none is visible, and CUDAGRAD_REQUIRE_GPU is set"; \
      GTEST_SKIP() << "needs a CUDA GPU; none is visible here";                             \
    }                                                                                       \
  } while (0)

// NEED_CUDA_LIBRARY("cuDNN"), after NEED_GPU(): the test exercises a vendor library (cuDNN, cuBLAS,
// NCCL) that the emulated GPU does not have; there it is skipped, listed as needing a real GPU.
// NEED_REAL_GPU("why"): the test measures what emulation cannot show (real stream concurrency,
// speed), so it runs on a real device only.
#ifdef CUDAGRAD_GPU_EMULATION
#define NEED_CUDA_LIBRARY(library) GTEST_SKIP() << "needs a real GPU: " << (library) << " is not emulated"
#define NEED_REAL_GPU(why) GTEST_SKIP() << "needs a real GPU: " << (why)
#else
#define NEED_CUDA_LIBRARY(library) \
  do {                             \
  } while (0)
#define NEED_REAL_GPU(why) \
  do {                     \
  } while (0)
#endif

// NEED_GPU_IMPL(ops::GpuImpl value), for tests parametrized by kernels.conv / kernels.batch_norm:
// the cuDNN choice needs the library (engine/ops.h must be included by the test).
#define NEED_GPU_IMPL(impl)                                             \
  do {                                                                  \
    if ((impl) == ::cg::ops::GpuImpl::cudnn) NEED_CUDA_LIBRARY("cuDNN"); \
  } while (0)
