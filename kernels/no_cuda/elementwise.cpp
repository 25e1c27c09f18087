// kernels/cuda/elementwise.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/elementwise.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void relu_forward(int64_t, DType, const void*, void*, Stream) { no_cuda("relu_forward"); }
void relu_backward(int64_t, DType, const void*, const void*, void*, Stream) { no_cuda("relu_backward"); }
void add(int64_t, DType, const void*, const void*, void*, Stream) { no_cuda("add"); }
void add_relu(int64_t, DType, const void*, const void*, void*, Stream) { no_cuda("add_relu"); }
void accumulate(int64_t, DType, const void*, void*, Stream) { no_cuda("accumulate"); }
void scale(int64_t, DType, float, const void*, void*, Stream) { no_cuda("scale"); }
void fill(int64_t, DType, double, void*, Stream) { no_cuda("fill"); }
void cast(int64_t, DType, const void*, DType, void*, Stream) { no_cuda("cast"); }

}  // namespace cg::kernels::cuda
#endif
