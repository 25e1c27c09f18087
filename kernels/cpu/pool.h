// CPU reference for global average pooling: [n*c, hw] -> [n*c].
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

template <typename T> void global_avg_pool_forward(int64_t nc, int64_t hw, const T* x, T* y);
// dx[i, j] = dy[i] / hw
template <typename T> void global_avg_pool_backward(int64_t nc, int64_t hw, const T* dy, T* dx);

}  // namespace cg::kernels::cpu
