// kernels/cuda/batchnorm.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/batchnorm.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void batchnorm_forward_train(const BatchNormShape&, DType, const void*, const float*, const float*, float, float,
                             float*, float*, void*, float*, float*, Activation, const void*, const WorkspaceFn&,
                             Stream) {
  no_cuda("batchnorm_forward_train");
}
void batchnorm_forward_eval(const BatchNormShape&, DType, const void*, const float*, const float*, const float*,
                            const float*, float, void*, Activation, const void*, const WorkspaceFn&, Stream) {
  no_cuda("batchnorm_forward_eval");
}
void batchnorm_backward_train(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                              const float*, void*, float*, float*, const void*, void*, const WorkspaceFn&, Stream) {
  no_cuda("batchnorm_backward_train");
}
void batchnorm_backward_eval(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                             const float*, float, void*, float*, float*, const void*, void*, const WorkspaceFn&,
                             Stream) {
  no_cuda("batchnorm_backward_eval");
}

}  // namespace cg::kernels::cuda
#endif
