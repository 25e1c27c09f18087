// CPU reference for 2-D batch normalization over NCHW (statistics per channel over N, H, W),
// with PyTorch's semantics: training normalizes with the biased batch variance and updates
// running_var with the unbiased one; running_* = (1 - momentum) * running_* + momentum * batch.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

struct BatchNormShape {
  int64_t n = 1, c = 1, hw = 1;  // hw = H * W
};

// An activation applied to the normalized output in the same pass (relu(bn(x)) is the pattern
// in every BasicBlock; fusing saves a full read and write of the activation each way).
enum class Activation { none, relu };

// Training forward. Writes y, save_mean[c], save_invstd[c] (1/sqrt(var_biased + eps)); updates
// running_mean / running_var in place when they are non-null.
template <typename T>
void batchnorm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                             T eps, T momentum, T* running_mean, T* running_var, T* y,
                             T* save_mean, T* save_invstd, Activation act = Activation::none);

// Eval forward with the running statistics.
template <typename T>
void batchnorm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                            const T* running_mean, const T* running_var, T eps, T* y,
                            Activation act = Activation::none);

// Backward of the training forward (batch statistics depend on x). Writes dx, dgamma, dbeta.
// relu_y: the forward's output when it applied Activation::relu (dy passes where it is > 0),
// else null.
template <typename T>
void batchnorm_backward_train(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                              const T* save_mean, const T* save_invstd, T* dx, T* dgamma,
                              T* dbeta, const T* relu_y = nullptr);

// Backward of the eval forward (statistics are constants). Writes dx, dgamma, dbeta.
template <typename T>
void batchnorm_backward_eval(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                             const T* running_mean, const T* running_var, T eps, T* dx,
                             T* dgamma, T* dbeta, const T* relu_y = nullptr);

}  // namespace cg::kernels::cpu
