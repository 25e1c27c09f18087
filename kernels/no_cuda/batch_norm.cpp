// kernels/cuda/batch_norm.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/batch_norm.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void batch_norm_forward_train(const BatchNormShape&, DType, const void*, const float*, const float*, float, float,
                             float*, float*, void*, float*, float*, Activation, const void*, const WorkspaceFn&,
                             Stream) {
  no_cuda("batch_norm_forward_train");
}
void batch_norm_forward_eval(const BatchNormShape&, DType, const void*, const float*, const float*, const float*,
                            const float*, float, void*, Activation, const void*, const WorkspaceFn&, Stream) {
  no_cuda("batch_norm_forward_eval");
}
void batch_norm_backward_train(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                              const float*, void*, float*, float*, const void*, void*, const WorkspaceFn&, Stream) {
  no_cuda("batch_norm_backward_train");
}
void batch_norm_backward_eval(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                             const float*, float, void*, float*, float*, const void*, void*, const WorkspaceFn&,
                             Stream) {
  no_cuda("batch_norm_backward_eval");
}
void batch_norm_local_moments(const BatchNormShape&, DType, const void*, double*, const WorkspaceFn&, Stream) {
  no_cuda("batch_norm_local_moments");
}
void batch_norm_forward_with_moments(const BatchNormShape&, DType, const void*, const float*, const float*, float, float,
                                    const double*, float*, float*, void*, float*, float*, Activation, const void*,
                                    const WorkspaceFn&, Stream) {
  no_cuda("batch_norm_forward_with_moments");
}
void batch_norm_local_grad_sums(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                               float*, float*, double*, const void*, void*, const WorkspaceFn&, Stream) {
  no_cuda("batch_norm_local_grad_sums");
}
void batch_norm_backward_with_sums(const BatchNormShape&, DType, const void*, const void*, const float*, const float*,
                                  const float*, const double*, const double*, void*, const void*, const void*,
                                  const WorkspaceFn&, Stream) {
  no_cuda("batch_norm_backward_with_sums");
}

}  // namespace cg::kernels::cuda
#endif
