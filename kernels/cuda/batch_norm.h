// Hand-written batch norm, the counterpart of kernels/cpu/batch_norm.h (same semantics and argument
// order). x, y, dy, dx, relu_y, residual and d_residual are `dtype` (f32, f16, bf16); gamma,
// beta, the running and saved statistics and dgamma/dbeta are float32, and all arithmetic is fp32
// (sums in a fixed order, so results are deterministic run to run). Channels-last activations
// use the shape kernels::channels_last_shape (H * W == 1), which runs kernels that read along rows.
#pragma once
#include "kernels/types.h"
#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

// The shared types (kernels/types.h), also under this namespace.
using ::cg::Activation;
using kernels::BatchNormShape;

void batch_norm_forward_train(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                             const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                             void* y, float* save_mean, float* save_invstd, Activation act, const void* residual,
                             const WorkspaceFn& workspace, Stream stream);
void batch_norm_forward_eval(const BatchNormShape& s, DType dtype, const void* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps, void* y, Activation act,
                            const void* residual, const WorkspaceFn& workspace, Stream stream);
void batch_norm_backward_train(const BatchNormShape& s, DType dtype, const void* dy, const void* x, const float* gamma,
                              const float* save_mean, const float* save_invstd, void* dx, float* dgamma, float* dbeta,
                              const void* relu_y, void* d_residual, const WorkspaceFn& workspace, Stream stream);
// Eval-mode backward (running statistics are constants): used when fine-tuning with frozen BN.
void batch_norm_backward_eval(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                             const float* gamma, const float* running_mean, const float* running_var, float eps,
                             void* dx, float* dgamma, float* dbeta, const void* relu_y, void* d_residual,
                             const WorkspaceFn& workspace, Stream stream);

// SyncBatchNorm's phases around the sum over replicas, with the semantics of the CPU reference's
// (kernels/cpu/batch_norm.h): moments [2C + 1] and sums [2C] are float64 device vectors; the
// global count is read on the device from moments[2C] (no host round trip).
void batch_norm_local_moments(const BatchNormShape& s, DType dtype, const void* x, double* moments,
                             const WorkspaceFn& workspace, Stream stream);
void batch_norm_forward_with_moments(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                                    const float* beta, float eps, float momentum, const double* moments,
                                    float* running_mean, float* running_var, void* y, float* save_mean,
                                    float* save_invstd, Activation act, const void* residual,
                                    const WorkspaceFn& workspace, Stream stream);
void batch_norm_local_grad_sums(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                               const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta,
                               double* sums, const void* relu_y, void* d_residual, const WorkspaceFn& workspace,
                               Stream stream);
void batch_norm_backward_with_sums(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                                  const float* gamma, const float* save_mean, const float* save_invstd,
                                  const double* sums, const double* moments, void* dx, const void* relu_y,
                                  const void* d_residual, const WorkspaceFn& workspace, Stream stream);

}  // namespace cg::kernels::cuda
