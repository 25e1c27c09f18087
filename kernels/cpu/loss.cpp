// Cross-entropy over log-softmax, row by row; the batch mean is summed in row order so the loss
// does not depend on the thread count.
#include "kernels/cpu/loss.h"

#include <cmath>
#include <vector>

namespace cg::kernels::cpu {

template <typename T>
int64_t cross_entropy_forward(int64_t n, int64_t classes, const T* logits, const int64_t* labels,
                              T* loss, T* probs) {
  double total = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * classes;
    T* p = probs + i * classes;
    int64_t argmax = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (row[j] > row[argmax]) argmax = j;
    const T max = row[argmax];
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      p[j] = std::exp(row[j] - max);
      sum += double(p[j]);
    }
    const T inv = T(1.0 / sum);
    for (int64_t j = 0; j < classes; ++j) p[j] *= inv;
    // -log softmax[label] = log(sum exp(x - max)) - (x[label] - max)
    total += std::log(sum) - double(row[labels[i]] - max);
    correct += argmax == labels[i];
  }
  *loss = T(total / double(n));
  return correct;
}

template <typename T>
void cross_entropy_backward(int64_t n, int64_t classes, T dloss, const T* probs,
                            const int64_t* labels, T* dlogits) {
  const T s = dloss / T(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < classes; ++j) dlogits[i * classes + j] = s * probs[i * classes + j];
    dlogits[i * classes + labels[i]] -= s;
  }
}

template int64_t cross_entropy_forward<float>(int64_t, int64_t, const float*, const int64_t*, float*, float*);
template int64_t cross_entropy_forward<double>(int64_t, int64_t, const double*, const int64_t*, double*, double*);
template void cross_entropy_backward<float>(int64_t, int64_t, float, const float*, const int64_t*, float*);
template void cross_entropy_backward<double>(int64_t, int64_t, double, const double*, const int64_t*, double*);

}  // namespace cg::kernels::cpu
