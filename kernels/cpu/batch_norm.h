// CPU reference for 2-D batch normalization over NCHW (statistics per channel over N, H, W),
// with PyTorch's semantics: training normalizes with the biased batch variance and updates
// running_var with the unbiased one; running_* = (1 - momentum) * running_* + momentum * batch.
#pragma once
#include <cstdint>

#include "kernels/types.h"

namespace cg::kernels::cpu {

using ::cg::Activation;
using kernels::BatchNormShape;
using kernels::channels_last_shape;

// Training forward. Writes y, save_mean[c], save_invstd[c] (1/sqrt(var_biased + eps)); updates
// running_mean / running_var in place when they are non-null. residual (x's shape, or null) is
// added to the normalized value, rounded to T first, before the activation: y = act(bn(x) + r),
// bit for bit what separate batch norm and add(+relu) passes produce.
template <typename T>
void batch_norm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                             T eps, T momentum, T* running_mean, T* running_var, T* y,
                             T* save_mean, T* save_invstd, Activation act = Activation::none,
                             const T* residual = nullptr);

// Eval forward with the running statistics.
template <typename T>
void batch_norm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                            const T* running_mean, const T* running_var, T eps, T* y,
                            Activation act = Activation::none, const T* residual = nullptr);

// Backward of the training forward (batch statistics depend on x). Writes dx, dgamma, dbeta.
// relu_y: the forward's output when it applied Activation::relu (dy passes where it is > 0),
// else null. d_residual (or null): receives the gradient of the forward's residual, which is
// the gradient reaching the normalization (dy, masked by the ReLU).
template <typename T>
void batch_norm_backward_train(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                              const T* save_mean, const T* save_invstd, T* dx, T* dgamma,
                              T* dbeta, const T* relu_y = nullptr, T* d_residual = nullptr);

// Backward of the eval forward (statistics are constants). Writes dx, dgamma, dbeta.
template <typename T>
void batch_norm_backward_eval(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                             const T* running_mean, const T* running_var, T eps, T* dx,
                             T* dgamma, T* dbeta, const T* relu_y = nullptr,
                             T* d_residual = nullptr);

// SyncBatchNorm: the training forward and backward cut around a sum over replicas (the caller
// sums the float64 vectors between the phases). Channel c's statistics are then those of every
// replica's values together, each replica weighing by its own count.
// moments [2C + 1]: sum x per channel, then sum x^2 per channel (taken around the local mean, so
// nothing cancels before the conversion in double), then this replica's count N * H * W.
template <typename T>
void batch_norm_local_moments(const BatchNormShape& s, const T* x, double* moments);
// The forward from summed moments (moments[2C] = the global count): y, save_mean/save_invstd
// (biased variance) and the running statistics (unbiased with the global count), as
// batch_norm_forward_train does with its own.
template <typename T>
void batch_norm_forward_with_moments(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, T eps,
                                    T momentum, const double* moments, T* running_mean, T* running_var, T* y,
                                    T* save_mean, T* save_invstd, Activation act = Activation::none,
                                    const T* residual = nullptr);
// This replica's part of the backward: dgamma, dbeta (local sums: DDP averages them as gradients),
// d_residual, and sums [2C] = (sum g, sum g * xhat) per channel, g the gradient reaching the
// normalization. dx may receive the ReLU-masked gradient (batch_norm_backward_with_sums reads it).
template <typename T>
void batch_norm_local_grad_sums(const BatchNormShape& s, const T* dy, const T* x, const T* save_mean,
                               const T* save_invstd, T* dgamma, T* dbeta, double* sums, T* dx,
                               const T* relu_y = nullptr, T* d_residual = nullptr);
// dx from the summed gradient sums and the global count (same arguments as the local phase).
template <typename T>
void batch_norm_backward_with_sums(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                                  const T* save_mean, const T* save_invstd, const double* sums, double count,
                                  T* dx, const T* relu_y = nullptr, const T* d_residual = nullptr);

}  // namespace cg::kernels::cpu
