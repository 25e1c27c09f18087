#include "kernels/cpu/pool.h"

#include "kernels/cpu/parallel.h"

namespace cg::kernels::cpu {

template <typename T>
void global_avg_pool_forward(int64_t nc, int64_t hw, const T* x, T* y) {
  parallel_for(nc, 64, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T s = 0;
      for (int64_t j = 0; j < hw; ++j) s += x[i * hw + j];
      y[i] = s / T(hw);
    }
  });
}

template <typename T>
void global_avg_pool_backward(int64_t nc, int64_t hw, const T* dy, T* dx) {
  parallel_for(nc, 64, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T g = dy[i] / T(hw);
      for (int64_t j = 0; j < hw; ++j) dx[i * hw + j] = g;
    }
  });
}

// One image per task; its c running sums advance together over the hw rows (contiguous reads).
template <typename T>
void global_avg_pool_nhwc_forward(int64_t n, int64_t hw, int64_t c, const T* x, T* y) {
  parallel_for(n, 1, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T* yi = y + i * c;
      for (int64_t k = 0; k < c; ++k) yi[k] = 0;
      for (int64_t j = 0; j < hw; ++j)
        for (int64_t k = 0; k < c; ++k) yi[k] += x[(i * hw + j) * c + k];
      for (int64_t k = 0; k < c; ++k) yi[k] /= T(hw);
    }
  });
}

template <typename T>
void global_avg_pool_nhwc_backward(int64_t n, int64_t hw, int64_t c, const T* dy, T* dx) {
  parallel_for(n, 1, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      for (int64_t j = 0; j < hw; ++j)
        for (int64_t k = 0; k < c; ++k) dx[(i * hw + j) * c + k] = dy[i * c + k] / T(hw);
  });
}

template void global_avg_pool_forward<float>(int64_t, int64_t, const float*, float*);
template void global_avg_pool_forward<double>(int64_t, int64_t, const double*, double*);
template void global_avg_pool_backward<float>(int64_t, int64_t, const float*, float*);
template void global_avg_pool_backward<double>(int64_t, int64_t, const double*, double*);
template void global_avg_pool_nhwc_forward<float>(int64_t, int64_t, int64_t, const float*, float*);
template void global_avg_pool_nhwc_forward<double>(int64_t, int64_t, int64_t, const double*, double*);
template void global_avg_pool_nhwc_backward<float>(int64_t, int64_t, int64_t, const float*, float*);
template void global_avg_pool_nhwc_backward<double>(int64_t, int64_t, int64_t, const double*, double*);

}  // namespace cg::kernels::cpu
