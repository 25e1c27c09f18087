// Optimizer updates, elementwise over one parameter tensor. Rule: every element is updated from
// its own values only, so any split across threads gives bit-identical results.
// Each case gets its own branch-free inner loop so the compiler vectorizes it.
#include "kernels/cpu/optim.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "util/check.h"

namespace cg::kernels::cpu {

void sgd_update(int64_t n, const SgdOptions& h, bool first_step, float* param, const float* grad,
                float* momentum_buf) {
  CG_CHECK(n == 0 || h.momentum == 0.f || momentum_buf != nullptr, "SGD with momentum {} needs a momentum buffer",
           h.momentum);
  CG_CHECK(!h.nesterov || (h.momentum > 0.f && h.dampening == 0.f),
           "Nesterov momentum needs momentum > 0 and dampening 0 (as torch.optim.SGD requires)");
  const float lr = h.lr, wd = h.weight_decay, mom = h.momentum, keep = 1.f - h.dampening;
  float* buf = momentum_buf;
  if (mom == 0.f) {
    parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) param[i] -= lr * (grad[i] + wd * param[i]);
    });
  } else if (first_step) {
    // PyTorch's first step: the buffer starts as a copy of the gradient, without dampening.
    const bool nesterov = h.nesterov;
    parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float g = grad[i] + wd * param[i];
        buf[i] = g;
        param[i] -= lr * (nesterov ? g + mom * g : g);
      }
    });
  } else if (h.nesterov) {
    parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float g = grad[i] + wd * param[i];
        buf[i] = mom * buf[i] + keep * g;
        param[i] -= lr * (g + mom * buf[i]);
      }
    });
  } else {
    parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float g = grad[i] + wd * param[i];
        buf[i] = mom * buf[i] + keep * g;
        param[i] -= lr * buf[i];
      }
    });
  }
}

void adamw_update(int64_t n, const AdamWOptions& h, int64_t step, float* param, const float* grad,
                  float* exp_avg, float* exp_avg_sq) {
  CG_CHECK(step >= 1, "AdamW step counts from 1, got {}", step);
  // Per-call scalars in double, then rounded once, as PyTorch computes them in Python floats.
  // (beta2^step in float would lose digits of 1 - beta2^step early in training.)
  const double bias1 = 1.0 - std::pow(double(h.beta1), double(step));
  const double bias2 = 1.0 - std::pow(double(h.beta2), double(step));
  const float step_size = float(double(h.lr) / bias1);
  const float bias2_sqrt = float(std::sqrt(bias2));
  const float decay = float(1.0 - double(h.lr) * double(h.weight_decay));
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps;
  const float one_minus_b1 = float(1.0 - double(b1)), one_minus_b2 = float(1.0 - double(b2));
  float* m = exp_avg;
  float* v = exp_avg_sq;
  parallel_for(n, kElementwiseGrain, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float g = grad[i];
      m[i] = b1 * m[i] + one_minus_b1 * g;
      v[i] = b2 * v[i] + one_minus_b2 * g * g;
      const float denom = std::sqrt(v[i]) / bias2_sqrt + eps;
      param[i] = param[i] * decay - step_size * m[i] / denom;
    }
  });
}

}  // namespace cg::kernels::cpu
