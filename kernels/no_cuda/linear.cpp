// kernels/cuda/linear.h without CUDA (every call fails naming the missing backend), or without
// cuBLAS (the emulated GPU: the cuBLAS calls fail, the native kernels are real).
#include "kernels/cuda/linear.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

#ifndef CUDAGRAD_WITH_CUDA_LIBRARIES
void linear_cublas_forward(int64_t, int64_t, int64_t, DType, const void*, const void*, const void*, void*, Stream, const WorkspaceFn&) {
  no_library("linear_cublas_forward", "cuBLAS");
}
void linear_cublas_backward(int64_t, int64_t, int64_t, DType, const void*, const void*, const void*, void*, void*,
                            void*, Stream, const WorkspaceFn&) {
  no_library("linear_cublas_backward", "cuBLAS");
}
#endif

#ifndef CUDAGRAD_WITH_CUDA
void linear_native_forward(int64_t, int64_t, int64_t, DType, const void*, const void*, const void*, void*, Stream, const WorkspaceFn&) {
  no_cuda("linear_native_forward");
}
void linear_native_backward(int64_t, int64_t, int64_t, DType, const void*, const void*, const void*, void*, void*,
                            void*, Stream, const WorkspaceFn&) {
  no_cuda("linear_native_backward");
}
void linear_add_bias(int64_t, int64_t, DType, const void*, void*, Stream, const WorkspaceFn&) { no_cuda("linear_add_bias"); }
void linear_bias_grad(int64_t, int64_t, DType, const void*, void*, Stream, const WorkspaceFn&) { no_cuda("linear_bias_grad"); }
#endif

}  // namespace cg::kernels::cuda
