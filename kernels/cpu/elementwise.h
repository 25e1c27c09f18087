// CPU reference for elementwise ops over n contiguous elements. Outputs are written (=), except
// the *_accumulate variants, which add (+=). In-place use (y == x) is allowed.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

template <typename T> void relu_forward(int64_t n, const T* x, T* y);
// dx = dy where y > 0 else 0 (y is the forward output).
template <typename T> void relu_backward(int64_t n, const T* dy, const T* y, T* dx);
template <typename T> void add(int64_t n, const T* a, const T* b, T* y);
// y = relu(a + b), the residual join of a BasicBlock.
template <typename T> void add_relu(int64_t n, const T* a, const T* b, T* y);
// y += x
template <typename T> void accumulate(int64_t n, const T* x, T* y);
template <typename T> void scale(int64_t n, T alpha, const T* x, T* y);
template <typename T> void fill(int64_t n, T value, T* y);
// y = silu(x) = x * sigmoid(x) (PyTorch's SiLU, also called swish).
template <typename T> void silu_forward(int64_t n, const T* x, T* y);
// dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x) (x is the forward input).
template <typename T> void silu_backward(int64_t n, const T* dy, const T* x, T* dx);

}  // namespace cg::kernels::cpu
