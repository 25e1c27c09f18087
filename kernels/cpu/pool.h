// CPU reference for global average pooling: NCHW [n*c, hw] -> [n*c], or channels-last
// [n, hw, c] -> [n, c]. Each output sums its hw inputs in order 0..hw-1 whatever the layout, so
// both layouts give bit-identical results on the same values.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

template <typename T> void global_avg_pool_forward(int64_t nc, int64_t hw, const T* x, T* y);
// dx[i, j] = dy[i] / hw
template <typename T> void global_avg_pool_backward(int64_t nc, int64_t hw, const T* dy, T* dx);

template <typename T> void global_avg_pool_nhwc_forward(int64_t n, int64_t hw, int64_t c, const T* x, T* y);
// dx[i, j, k] = dy[i, k] / hw
template <typename T> void global_avg_pool_nhwc_backward(int64_t n, int64_t hw, int64_t c, const T* dy, T* dx);

}  // namespace cg::kernels::cpu
