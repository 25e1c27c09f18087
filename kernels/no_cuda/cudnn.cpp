// kernels/cuda/cudnn.h without CUDA: nothing is supported; calls fail naming the backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/cudnn.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void set_cudnn_algo_search(AlgoSearch) {}
int cudnn_version() { return 0; }
bool conv2d_cudnn_supports(const Conv2dShape&, DType) { return false; }
void conv2d_cudnn_forward(const Conv2dShape&, DType, const void*, const void*, const void*, void*, const WorkspaceFn&,
                          Stream, Layout) {
  no_cuda("conv2d_cudnn_forward");
}
void conv2d_cudnn_backward_data(const Conv2dShape&, DType, const void*, const void*, void*, const WorkspaceFn&, Stream,
                                Layout) {
  no_cuda("conv2d_cudnn_backward_data");
}
void conv2d_cudnn_backward_filter(const Conv2dShape&, DType, const void*, const void*, void*, void*,
                                  const WorkspaceFn&, Stream, Layout) {
  no_cuda("conv2d_cudnn_backward_filter");
}
bool batchnorm_cudnn_supports(const BatchNormShape&, DType) { return false; }
void batchnorm_cudnn_forward_train(const BatchNormShape&, DType, const void*, const float*, const float*, float, float,
                                   float*, float*, void*, float*, float*, Activation, const void*, Stream) {
  no_cuda("batchnorm_cudnn_forward_train");
}
void batchnorm_cudnn_forward_eval(const BatchNormShape&, DType, const void*, const float*, const float*, const float*,
                                  const float*, float, void*, Activation, const void*, Stream) {
  no_cuda("batchnorm_cudnn_forward_eval");
}
void batchnorm_cudnn_backward_train(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                                    const float*, float, void*, float*, float*, const void*, void*, const WorkspaceFn&,
                                    Stream) {
  no_cuda("batchnorm_cudnn_backward_train");
}

}  // namespace cg::kernels::cuda
#endif
