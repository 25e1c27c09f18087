// Linear layer through Eigen matrix products on row-major maps (PyTorch's [out, in] weights).
#include "kernels/cpu/linear.h"

#include <Eigen/Dense>

namespace cg::kernels::cpu {
namespace {
template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}

template <typename T>
void linear_forward(int64_t m, int64_t k, int64_t n, const T* x, const T* w, const T* b, T* y) {
  Eigen::Map<const RowMajor<T>> X(x, m, k), W(w, n, k);
  Eigen::Map<RowMajor<T>> Y(y, m, n);
  Y.noalias() = X * W.transpose();
  if (b) Y.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(b, n);
}

template <typename T>
void linear_backward(int64_t m, int64_t k, int64_t n, const T* dy, const T* x, const T* w, T* dx,
                     T* dw, T* db) {
  Eigen::Map<const RowMajor<T>> DY(dy, m, n), X(x, m, k), W(w, n, k);
  if (dx) Eigen::Map<RowMajor<T>>(dx, m, k).noalias() = DY * W;
  Eigen::Map<RowMajor<T>>(dw, n, k).noalias() = DY.transpose() * X;
  if (db) {
    for (int64_t j = 0; j < n; ++j) db[j] = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) db[j] += dy[i * n + j];
  }
}

template void linear_forward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*);
template void linear_forward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*, double*);
template void linear_backward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, float*, float*);
template void linear_backward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*, double*, double*, double*);

}  // namespace cg::kernels::cpu
