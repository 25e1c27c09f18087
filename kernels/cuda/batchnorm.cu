// Batch norm on the GPU. Statistics are reduced per channel by one block in a fixed tree order
// (in double), so results are deterministic run to run; at MiniResNet's sizes (64..256 channels)
// that is enough blocks to occupy the GPU. Activations may be half; all arithmetic is fp32/fp64.
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/dtype.cuh"

namespace cg::kernels::cuda {
namespace {

// Element j of channel c: x[(i * C + c) * HW + p] for j = i * HW + p.
__device__ __forceinline__ int64_t channel_index(const BatchNormShape& s, int64_t c, int64_t j) {
  return ((j / s.hw) * s.c + c) * s.hw + j % s.hw;
}

// The gradient reaching the normalization: dy, masked where a fused ReLU's output was zero.
template <typename T>
__device__ __forceinline__ float grad_in(const T* dy, const T* relu_y, int64_t i) {
  return relu_y && !(to_f32(relu_y[i]) > 0.f) ? 0.f : to_f32(dy[i]);
}

template <typename T>
__global__ void train_forward_kernel(BatchNormShape s, const T* x, const float* gamma, const float* beta, float eps,
                                     float momentum, float* running_mean, float* running_var, T* y, float* save_mean,
                                     float* save_invstd, Activation act) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) sum += to_f32(x[channel_index(s, c, j)]);
  const double mean = block_sum(sum, shared) / double(m);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const double d = to_f32(x[channel_index(s, c, j)]) - mean;
    sq += d * d;
  }
  const double var = block_sum(sq, shared) / double(m);
  const float invstd = float(1.0 / sqrt(var + double(eps)));
  if (threadIdx.x == 0) {
    save_mean[c] = float(mean);
    save_invstd[c] = invstd;
    if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * float(mean);
    if (running_var) {
      const double unbiased = m > 1 ? var * double(m) / double(m - 1) : var;
      running_var[c] = (1.f - momentum) * running_var[c] + momentum * float(unbiased);
    }
  }
  const float scale = gamma[c] * invstd, shift = beta[c] - float(mean) * scale;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t i = channel_index(s, c, j);
    const float v = to_f32(x[i]) * scale + shift;
    y[i] = from_f32<T>(act == Activation::relu ? fmaxf(v, 0.f) : v);
  }
}

template <typename T>
__global__ void eval_forward_kernel(BatchNormShape s, const T* x, const float* gamma, const float* beta,
                                    const float* running_mean, const float* running_var, float eps, T* y,
                                    Activation act) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / s.hw) % s.c;
    const float scale = gamma[c] * rsqrtf(running_var[c] + eps);
    const float v = (to_f32(x[i]) - running_mean[c]) * scale + beta[c];
    y[i] = from_f32<T>(act == Activation::relu ? fmaxf(v, 0.f) : v);
  }
}

// training: dx = k (g - mean(g) - xhat mean(g xhat)); eval (statistics constant): dx = k g.
template <typename T>
__global__ void backward_kernel(BatchNormShape s, bool training, const T* dy, const T* x, const float* gamma,
                                const float* mean_, const float* invstd_, const float* var_, float eps, T* dx,
                                float* dgamma, float* dbeta, const T* relu_y) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  const float mean = mean_[c], invstd = training ? invstd_[c] : rsqrtf(var_[c] + eps);
  double sum_g = 0, sum_g_xhat = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t i = channel_index(s, c, j);
    const float g = grad_in(dy, relu_y, i);
    sum_g += g;
    sum_g_xhat += double(g) * double(to_f32(x[i]) - mean) * invstd;
  }
  sum_g = block_sum(sum_g, shared);
  sum_g_xhat = block_sum(sum_g_xhat, shared);
  if (threadIdx.x == 0) {
    dbeta[c] = float(sum_g);
    dgamma[c] = float(sum_g_xhat);
  }
  const float k = gamma[c] * invstd;
  const float mean_g = training ? float(sum_g / double(m)) : 0.f, proj = training ? float(sum_g_xhat / double(m)) : 0.f;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t i = channel_index(s, c, j);
    const float g = grad_in(dy, relu_y, i);
    dx[i] = from_f32<T>(k * (g - mean_g - (to_f32(x[i]) - mean) * invstd * proj));
  }
}

template <typename T>
struct TrainForward {
  static void run(const BatchNormShape& s, const void* x, const float* gamma, const float* beta, float eps,
                  float momentum, float* rm, float* rv, void* y, float* sm, float* si, Activation act, Stream st) {
    train_forward_kernel<T><<<int(s.c), kThreads, 0, as_cuda(st)>>>(s, static_cast<const T*>(x), gamma, beta, eps,
                                                                     momentum, rm, rv, static_cast<T*>(y), sm, si, act);
    CG_CUDA_AFTER_LAUNCH("batchnorm train_forward_kernel");
  }
};

template <typename T>
struct EvalForward {
  static void run(const BatchNormShape& s, const void* x, const float* gamma, const float* beta, const float* rm,
                  const float* rv, float eps, void* y, Activation act, Stream st) {
    eval_forward_kernel<T><<<blocks_for(s.n * s.c * s.hw), kThreads, 0, as_cuda(st)>>>(
        s, static_cast<const T*>(x), gamma, beta, rm, rv, eps, static_cast<T*>(y), act);
    CG_CUDA_AFTER_LAUNCH("batchnorm eval_forward_kernel");
  }
};

template <typename T>
struct Backward {
  static void run(const BatchNormShape& s, bool training, const void* dy, const void* x, const float* gamma,
                  const float* mean, const float* invstd, const float* var, float eps, void* dx, float* dgamma,
                  float* dbeta, const void* relu_y, Stream st) {
    backward_kernel<T><<<int(s.c), kThreads, 0, as_cuda(st)>>>(
        s, training, static_cast<const T*>(dy), static_cast<const T*>(x), gamma, mean, invstd, var, eps,
        static_cast<T*>(dx), dgamma, dbeta, static_cast<const T*>(relu_y));
    CG_CUDA_AFTER_LAUNCH("batchnorm backward_kernel");
  }
};

}  // namespace

void batchnorm_forward_train(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                             const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                             void* y, float* save_mean, float* save_invstd, Activation act, Stream stream) {
  dispatch_floating<TrainForward>("batchnorm_forward_train", dtype, s, x, gamma, beta, eps, momentum, running_mean,
                                  running_var, y, save_mean, save_invstd, act, stream);
}

void batchnorm_forward_eval(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var, float eps,
                            void* y, Activation act, Stream stream) {
  dispatch_floating<EvalForward>("batchnorm_forward_eval", dtype, s, x, gamma, beta, running_mean, running_var, eps,
                                 y, act, stream);
}

void batchnorm_backward_train(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                              const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                              float* dgamma, float* dbeta, const void* relu_y, Stream stream) {
  dispatch_floating<Backward>("batchnorm_backward_train", dtype, s, true, dy, x, gamma, save_mean, save_invstd,
                              static_cast<const float*>(nullptr), 0.f, dx, dgamma, dbeta, relu_y, stream);
}

void batchnorm_backward_eval(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                             const float* gamma, const float* running_mean, const float* running_var, float eps,
                             void* dx, float* dgamma, float* dbeta, const void* relu_y, Stream stream) {
  dispatch_floating<Backward>("batchnorm_backward_eval", dtype, s, false, dy, x, gamma, running_mean,
                              static_cast<const float*>(nullptr), running_var, eps, dx, dgamma, dbeta, relu_y, stream);
}

}  // namespace cg::kernels::cuda
