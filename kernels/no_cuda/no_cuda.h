// Shared by the kernels/no_cuda/*.cpp stand-ins for kernels/cuda/ in a build without CUDA.
#pragma once
#include "util/check.h"

namespace cg::kernels::cuda {

[[noreturn]] inline void no_cuda(const char* what) {
  throw Error(fmt::format("{}: this build has no CUDA backend (configure with -DCUDAGRAD_CUDA=ON)", what));
}

// A vendor library's entry point in a build without it: no CUDA at all, or the emulated GPU, which
// runs cudagrad's own kernels and not cuDNN or cuBLAS.
[[noreturn]] inline void no_library(const char* what, const char* library) {
#ifdef CUDAGRAD_GPU_EMULATION
  throw Error(fmt::format("{}: {} is not emulated (this is the emulated-GPU build, which runs cudagrad's own "
                          "kernels: kernels.conv=native, kernels.batch_norm=native)",
                          what, library));
#else
  (void)library;
  no_cuda(what);
#endif
}

}  // namespace cg::kernels::cuda
