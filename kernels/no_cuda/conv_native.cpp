// kernels/cuda/conv_native.h without CUDA: no shape is supported; calls fail naming the backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/conv_native.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

bool conv2d_native_supports(const Conv2dShape&, DType) { return false; }
void conv2d_native_forward(const Conv2dShape&, DType, const void*, const void*, const void*, void*, Stream) {
  no_cuda("conv2d_native_forward");
}
void conv2d_native_backward_data(const Conv2dShape&, DType, const void*, const void*, void*, Stream) {
  no_cuda("conv2d_native_backward_data");
}
void conv2d_native_backward_filter(const Conv2dShape&, DType, const void*, const void*, void*, void*,
                                   const WorkspaceFn&, Stream) {
  no_cuda("conv2d_native_backward_filter");
}

}  // namespace cg::kernels::cuda
#endif
