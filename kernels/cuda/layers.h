// CUDA counterparts of kernels/cpu/{batchnorm,pool,loss,optim}.h: same semantics, same argument
// order, float32, device pointers, on a stream. Batch-norm statistics are reduced per channel by
// one block in a fixed order, so results are deterministic run to run.
#pragma once
#include <cstdint>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

using cpu::Activation;
using cpu::BatchNormShape;

void batchnorm_forward_train(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             float eps, float momentum, float* running_mean, float* running_var, float* y,
                             float* save_mean, float* save_invstd, Activation act, Stream stream);
void batchnorm_forward_eval(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps, float* y,
                            Activation act, Stream stream);
void batchnorm_backward_train(const BatchNormShape& s, const float* dy, const float* x, const float* gamma,
                              const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                              float* dbeta, const float* relu_y, Stream stream);

void global_avg_pool_forward(int64_t nc, int64_t hw, const float* x, float* y, Stream stream);
void global_avg_pool_backward(int64_t nc, int64_t hw, const float* dy, float* dx, Stream stream);

// loss (one float) and the number of correct rows (one int64) are written to device memory.
void cross_entropy_forward(int64_t n, int64_t classes, const float* logits, const int64_t* labels, float* loss,
                           float* probs, int64_t* correct, Stream stream);
void cross_entropy_backward(int64_t n, int64_t classes, const float* dloss, const float* probs,
                            const int64_t* labels, float* dlogits, Stream stream);

void sgd_update(int64_t n, const cpu::SgdParams& h, bool first_step, float* param, const float* grad,
                float* momentum_buf, Stream stream);
void adamw_update(int64_t n, const cpu::AdamWParams& h, int64_t step, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, Stream stream);

}  // namespace cg::kernels::cuda
