// Shared by the kernels/no_cuda/*.cpp stand-ins for kernels/cuda/ in a build without CUDA.
#pragma once
#include "util/check.h"

namespace cg::kernels::cuda {

[[noreturn]] inline void no_cuda(const char* what) {
  throw Error(fmt::format("{}: this build has no CUDA backend (configure with -DCUDAGRAD_CUDA=ON)", what));
}

}  // namespace cg::kernels::cuda
