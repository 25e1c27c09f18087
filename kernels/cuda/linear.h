// Fully-connected layer on the GPU, row-major like kernels/cpu/linear.h: x [m, k], w [n, k]
// (PyTorch order), bias [n] or null, y [m, n]. All tensors `dtype` (f32, f16, bf16); products
// accumulate in fp32. Two implementations with the same semantics: cuBLAS (linear_cublas.cu: one
// handle per device, bound to the stream of each call; tensor cores for f16/bf16) and cudagrad's
// own tiled kernel (linear_native.cu), which also runs where cuBLAS is absent (the emulated GPU).
// Both add the bias and sum its gradient with the same small kernels (linear_native.cu).
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

bool cublas_in_build();  // false in the emulated-GPU build
void linear_cublas_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w,
                           const void* bias, void* y, Stream stream);
// dx (may be null) = dy w; dw = dy^T x; db (may be null) = column sums of dy. All written (=).
void linear_cublas_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x,
                            const void* w, void* dx, void* dw, void* db, Stream stream);

void linear_native_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w,
                           const void* bias, void* y, Stream stream);
void linear_native_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x,
                            const void* w, void* dx, void* dw, void* db, Stream stream);

// y[i, j] += bias[j] over y [m, n]; db[j] = sum over rows of dy[:, j], rows in order.
void linear_add_bias(int64_t m, int64_t n, DType dtype, const void* bias, void* y, Stream stream);
void linear_bias_grad(int64_t m, int64_t n, DType dtype, const void* dy, void* db, Stream stream);

}  // namespace cg::kernels::cuda
