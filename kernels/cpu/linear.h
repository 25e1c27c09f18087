// CPU reference for a fully-connected layer: y[m, n] = x[m, k] * w[n, k]^T + b[n] (PyTorch's
// weight layout [out_features, in_features]). Backward writes (=) dx, dw, db.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

template <typename T>
void linear_forward(int64_t m, int64_t k, int64_t n, const T* x, const T* w, const T* b, T* y);
// dx may be null (input needs no gradient); db may be null (no bias).
template <typename T>
void linear_backward(int64_t m, int64_t k, int64_t n, const T* dy, const T* x, const T* w, T* dx,
                     T* dw, T* db);

}  // namespace cg::kernels::cpu
