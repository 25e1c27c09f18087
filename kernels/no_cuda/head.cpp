// kernels/cuda/head.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/head.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void global_avg_pool_forward(int64_t, int64_t, DType, const void*, void*, Stream) { no_cuda("global_avg_pool_forward"); }
void global_avg_pool_backward(int64_t, int64_t, DType, const void*, void*, Stream) { no_cuda("global_avg_pool_backward"); }
void global_avg_pool_nhwc_forward(int64_t, int64_t, int64_t, DType, const void*, void*, Stream) {
  no_cuda("global_avg_pool_nhwc_forward");
}
void global_avg_pool_nhwc_backward(int64_t, int64_t, int64_t, DType, const void*, void*, Stream) {
  no_cuda("global_avg_pool_nhwc_backward");
}
void cross_entropy_forward(int64_t, int64_t, const float*, const int64_t*, float*, float*, int64_t*, Stream) {
  no_cuda("cross_entropy_forward");
}
void cross_entropy_backward(int64_t, int64_t, const float*, const float*, const int64_t*, float*, Stream) {
  no_cuda("cross_entropy_backward");
}

}  // namespace cg::kernels::cuda
#endif
