// Elementwise kernels: plain loops the compiler vectorizes, split by parallel_for. The lambdas
// capture by value: captured-by-reference pointers are reloaded every iteration (they might alias
// the stores), which kept GCC from vectorizing and made relu_backward 4x slower.
#include "kernels/cpu/elementwise.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace cg::kernels::cpu {

template <typename T>
void relu_forward(int64_t n, const T* x, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  });
}

template <typename T>
void relu_backward(int64_t n, const T* dy, const T* y, T* dx) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    const T* g = dy;  // locals: stores through dx cannot change them, so the loop vectorizes
    const T* out = y;
    T* d = dx;
    for (int64_t i = b; i < e; ++i) {
      const T gi = g[i];  // loaded unconditionally: a conditional load blocks vectorization
      d[i] = out[i] > T(0) ? gi : T(0);
    }
  });
}

template <typename T>
void add(int64_t n, const T* a, const T* b_, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = a[i] + b_[i];
  });
}

template <typename T>
void add_relu(int64_t n, const T* a, const T* b_, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T s = a[i] + b_[i];
      y[i] = s > T(0) ? s : T(0);
    }
  });
}

template <typename T>
void accumulate(int64_t n, const T* x, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] += x[i];
  });
}

template <typename T>
void scale(int64_t n, T alpha, const T* x, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = alpha * x[i];
  });
}

template <typename T>
void fill(int64_t n, T value, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) { std::fill(y + b, y + e, value); });
}

template <typename T>
void silu_forward(int64_t n, const T* x, T* y) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = x[i] / (T(1) + std::exp(-x[i]));
  });
}

template <typename T>
void silu_backward(int64_t n, const T* dy, const T* x, T* dx) {
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T s = T(1) / (T(1) + std::exp(-x[i]));
      dx[i] = dy[i] * s * (T(1) + x[i] * (T(1) - s));
    }
  });
}

#define CG_INSTANTIATE(T)                                          \
  template void relu_forward<T>(int64_t, const T*, T*);            \
  template void relu_backward<T>(int64_t, const T*, const T*, T*); \
  template void add<T>(int64_t, const T*, const T*, T*);           \
  template void add_relu<T>(int64_t, const T*, const T*, T*);      \
  template void accumulate<T>(int64_t, const T*, T*);              \
  template void scale<T>(int64_t, T, const T*, T*);                \
  template void fill<T>(int64_t, T, T*);                            \
  template void silu_forward<T>(int64_t, const T*, T*);            \
  template void silu_backward<T>(int64_t, const T*, const T*, T*);
CG_INSTANTIATE(float)
CG_INSTANTIATE(double)
#undef CG_INSTANTIATE

}  // namespace cg::kernels::cpu
