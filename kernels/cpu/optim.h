// CPU reference for optimizer updates over one parameter tensor of n elements, with PyTorch's
// semantics (torch.optim.SGD and torch.optim.AdamW, single-tensor "foreach=False" path).
#pragma once
#include <cstdint>

#include "kernels/types.h"

namespace cg::kernels::cpu {

// g' = g + wd * p; b = first_step ? g' : momentum * b + (1 - dampening) * g';
// d = nesterov ? g' + momentum * b : b (d = g' when momentum == 0); p -= lr * d.
// momentum_buf may be null when momentum == 0.
void sgd_update(int64_t n, const SgdOptions& h, bool first_step, float* param, const float* grad,
                float* momentum_buf);

// step is 1-based. p *= (1 - lr * wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)   (PyTorch's formulation)
void adamw_update(int64_t n, const AdamWOptions& h, int64_t step, float* param, const float* grad,
                  float* exp_avg, float* exp_avg_sq);

}  // namespace cg::kernels::cpu
