// Fully-connected layer on the GPU through cuBLAS (one handle per device, bound to the stream of
// each call), with small kernels for the bias. Row-major like kernels/cpu/linear.h:
// x [m, k], w [n, k] (PyTorch order), bias [n] or null, y [m, n]. All tensors `dtype` (f32, f16,
// bf16); products accumulate in fp32 (tensor cores for f16/bf16).
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

void linear_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w, const void* bias,
                    void* y, Stream stream);
// dx (may be null) = dy w; dw = dy^T x; db (may be null) = column sums of dy. All written (=).
void linear_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x, const void* w,
                     void* dx, void* dw, void* db, Stream stream);

}  // namespace cg::kernels::cuda
