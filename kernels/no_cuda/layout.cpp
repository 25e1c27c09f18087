// kernels/cuda/layout.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/layout.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void batched_transpose(int64_t, int64_t, int64_t, DType, const void*, DType, void*, Stream) {
  no_cuda("batched_transpose");
}

}  // namespace cg::kernels::cuda
#endif
