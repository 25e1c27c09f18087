// Fully-connected layer on the GPU, row-major like kernels/cpu/linear.h: x [m, k], w [n, k]
// (PyTorch order), bias [n] or null, y [m, n]. All tensors `dtype` (f32, f16, bf16); products
// accumulate in fp32. Two implementations with the same semantics: cuBLAS (linear_cublas.cu: one
// handle per device, bound to the stream of each call; tensor cores for f16/bf16) and cudagrad's
// own tiled kernel (linear_native.cu), which also runs where cuBLAS is absent (the emulated GPU).
// Both add the bias and sum its gradient with the same small kernels (linear_native.cu).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

// `workspace` (may be empty): cuBLAS's scratch memory for the call, kCublasWorkspaceBytes from the
// caller's allocator, so that a call captured in a CUDA graph and its replays use the graph's own
// memory (and the same algorithm) rather than cuBLAS's internal pool. Empty: cuBLAS's pool. The
// native kernel needs none and ignores it (one signature serves both implementations).
void linear_cublas_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w,
                           const void* bias, void* y, Stream stream, const WorkspaceFn& workspace);
// dx (may be null) = dy w; dw = dy^T x; db (may be null) = column sums of dy. All written (=).
void linear_cublas_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x,
                            const void* w, void* dx, void* dw, void* db, Stream stream, const WorkspaceFn& workspace);
// 32 MiB: what NVIDIA recommends for cuBLAS on Hopper, and PyTorch's choice there; a cached block,
// so it costs one allocation per pool, not per call.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

void linear_native_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w,
                           const void* bias, void* y, Stream stream, const WorkspaceFn& workspace);
void linear_native_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x,
                            const void* w, void* dx, void* dw, void* db, Stream stream, const WorkspaceFn& workspace);

// y[i, j] += bias[j] over y [m, n]; db[j] = sum over rows of dy[:, j], rows in order.
void linear_add_bias(int64_t m, int64_t n, DType dtype, const void* bias, void* y, Stream stream);
void linear_bias_grad(int64_t m, int64_t n, DType dtype, const void* dy, void* db, Stream stream);

}  // namespace cg::kernels::cuda
