// kernels/cuda/linear.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/linear.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void linear_forward(int64_t, int64_t, int64_t, DType, const void*, const void*, const void*, void*, Stream) {
  no_cuda("linear_forward");
}
void linear_backward(int64_t, int64_t, int64_t, DType, const void*, const void*, const void*, void*, void*, void*,
                     Stream) {
  no_cuda("linear_backward");
}

}  // namespace cg::kernels::cuda
#endif
