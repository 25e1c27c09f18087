// kernels/cuda/cudnn.h without cuDNN (no CUDA, or the emulated GPU): nothing is supported; calls
// fail naming what is missing.
#ifndef CUDAGRAD_WITH_CUDA_LIBRARIES
#include "kernels/cuda/cudnn.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

int cudnn_version() { return 0; }
bool conv2d_cudnn_supports(const Conv2dShape&, DType) { return false; }
void conv2d_cudnn_forward(const Conv2dShape&, DType, const void*, const void*, const void*, void*, const WorkspaceFn&,
                          Stream, Layout, AlgoSearch) {
  no_library("conv2d_cudnn_forward", "cuDNN");
}
void conv2d_cudnn_backward_data(const Conv2dShape&, DType, const void*, const void*, void*, const WorkspaceFn&, Stream,
                                Layout, AlgoSearch) {
  no_library("conv2d_cudnn_backward_data", "cuDNN");
}
void conv2d_cudnn_backward_filter(const Conv2dShape&, DType, const void*, const void*, void*, void*,
                                  const WorkspaceFn&, Stream, Layout, AlgoSearch) {
  no_library("conv2d_cudnn_backward_filter", "cuDNN");
}
bool batch_norm_cudnn_supports(const BatchNormShape&, DType) { return false; }
void batch_norm_cudnn_forward_train(const BatchNormShape&, DType, const void*, const float*, const float*, float, float,
                                   float*, float*, void*, float*, float*, Activation, const void*, Stream) {
  no_library("batch_norm_cudnn_forward_train", "cuDNN");
}
void batch_norm_cudnn_forward_eval(const BatchNormShape&, DType, const void*, const float*, const float*, const float*,
                                  const float*, float, void*, Activation, const void*, Stream) {
  no_library("batch_norm_cudnn_forward_eval", "cuDNN");
}
void batch_norm_cudnn_backward_train(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                                    const float*, float, void*, float*, float*, const void*, void*, const WorkspaceFn&,
                                    Stream) {
  no_library("batch_norm_cudnn_backward_train", "cuDNN");
}

}  // namespace cg::kernels::cuda
#endif
