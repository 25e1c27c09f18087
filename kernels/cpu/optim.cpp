// Optimizer updates, elementwise over one parameter tensor (so any parallel split is exact).
#include "kernels/cpu/optim.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace cg::kernels::cpu {

void sgd_update(int64_t n, const SgdParams& h, bool first_step, float* param, const float* grad,
                float* buf) {
  const float lr = h.lr, mom = h.momentum, wd = h.weight_decay, damp = 1.f - h.dampening;
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float g = grad[i] + wd * param[i];
      if (mom != 0.f) {
        buf[i] = first_step ? g : mom * buf[i] + damp * g;
        g = h.nesterov ? g + mom * buf[i] : buf[i];
      }
      param[i] -= lr * g;
    }
  });
}

void adamw_update(int64_t n, const AdamWParams& h, int64_t step, float* param, const float* grad,
                  float* m, float* v) {
  const float b1 = h.beta1, b2 = h.beta2;
  const float bias1 = 1.f - std::pow(b1, float(step));
  const float bias2_sqrt = std::sqrt(1.f - std::pow(b2, float(step)));
  const float step_size = h.lr / bias1, decay = 1.f - h.lr * h.weight_decay;
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      param[i] *= decay;
      m[i] = b1 * m[i] + (1.f - b1) * grad[i];
      v[i] = b2 * v[i] + (1.f - b2) * grad[i] * grad[i];
      const float denom = std::sqrt(v[i]) / bias2_sqrt + h.eps;
      param[i] -= step_size * m[i] / denom;
    }
  });
}

}  // namespace cg::kernels::cpu
