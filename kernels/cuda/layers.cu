// Batch norm, pooling, cross-entropy and optimizer kernels. Reductions use one block per channel
// (or row) with a fixed tree order in shared memory: deterministic, and at MiniResNet's sizes
// (C = 64..256 channels, N*H*W up to 64K values) enough blocks to fill the GPU.
#include <cmath>

#include "kernels/cuda/check.h"
#include "kernels/cuda/layers.h"

namespace cg::kernels::cuda {
namespace {

constexpr int kThreads = 256;
cudaStream_t as_cuda(Stream s) { return static_cast<cudaStream_t>(s); }

// Sum over the block of one double per thread, in a fixed tree order; the result is in lane 0.
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

// Element j of channel c: x[(i * C + c) * HW + p] for j = i * HW + p.
__device__ int64_t channel_index(const BatchNormShape& s, int64_t c, int64_t j) {
  return ((j / s.hw) * s.c + c) * s.hw + j % s.hw;
}

__global__ void bn_train_forward_kernel(BatchNormShape s, const float* x, const float* gamma, const float* beta,
                                        float eps, float momentum, float* running_mean, float* running_var,
                                        float* y, float* save_mean, float* save_invstd, Activation act) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) sum += x[channel_index(s, c, j)];
  const double mean = block_sum(sum, shared) / double(m);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const double d = x[channel_index(s, c, j)] - mean;
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
    const float v = x[i] * scale + shift;
    y[i] = act == Activation::relu ? fmaxf(v, 0.f) : v;
  }
}

__global__ void bn_eval_forward_kernel(BatchNormShape s, const float* x, const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var, float eps, float* y,
                                       Activation act) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / s.hw) % s.c;
    const float scale = gamma[c] * rsqrtf(running_var[c] + eps);
    const float v = (x[i] - running_mean[c]) * scale + beta[c];
    y[i] = act == Activation::relu ? fmaxf(v, 0.f) : v;
  }
}

__global__ void bn_train_backward_kernel(BatchNormShape s, const float* dy, const float* x, const float* gamma,
                                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                                         float* dbeta, const float* relu_y) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  const float mean = save_mean[c], invstd = save_invstd[c];
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t i = channel_index(s, c, j);
    const float g = relu_y && relu_y[i] <= 0.f ? 0.f : dy[i];
    sum_dy += g;
    sum_dy_xhat += double(g) * double(x[i] - mean) * invstd;
  }
  sum_dy = block_sum(sum_dy, shared);
  sum_dy_xhat = block_sum(sum_dy_xhat, shared);
  if (threadIdx.x == 0) {
    dbeta[c] = float(sum_dy);
    dgamma[c] = float(sum_dy_xhat);
  }
  const float k = gamma[c] * invstd, mean_dy = float(sum_dy / double(m)), proj = float(sum_dy_xhat / double(m));
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t i = channel_index(s, c, j);
    const float g = relu_y && relu_y[i] <= 0.f ? 0.f : dy[i];
    dx[i] = k * (g - mean_dy - (x[i] - mean) * invstd * proj);
  }
}

__global__ void avg_pool_forward_kernel(int64_t nc, int64_t hw, const float* x, float* y) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < nc; r += int64_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (int64_t j = 0; j < hw; ++j) s += x[r * hw + j];
    y[r] = s / float(hw);
  }
}

__global__ void avg_pool_backward_kernel(int64_t nc, int64_t hw, const float* dy, float* dx) {
  const int64_t total = nc * hw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = dy[i / hw] / float(hw);
}

// One thread per row (classes are few); the batch mean and hit count are summed by block 0 in
// row order afterwards, so the loss is deterministic.
__global__ void ce_rows_kernel(int64_t n, int64_t classes, const float* logits, const int64_t* labels, float* probs,
                               double* row_loss, int64_t* row_hit) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= n) return;
  const float* z = logits + r * classes;
  int64_t arg = 0;
  for (int64_t j = 1; j < classes; ++j)
    if (z[j] > z[arg]) arg = j;
  double sum = 0;
  for (int64_t j = 0; j < classes; ++j) sum += exp(double(z[j] - z[arg]));
  for (int64_t j = 0; j < classes; ++j) probs[r * classes + j] = float(exp(double(z[j] - z[arg])) / sum);
  row_loss[r] = log(sum) - double(z[labels[r]] - z[arg]);
  row_hit[r] = arg == labels[r];
}

__global__ void ce_reduce_kernel(int64_t n, const double* row_loss, const int64_t* row_hit, float* loss,
                                 int64_t* correct) {
  __shared__ double shared[kThreads];
  double l = 0, h = 0;
  for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
    l += row_loss[r];
    h += double(row_hit[r]);
  }
  l = block_sum(l, shared);
  h = block_sum(h, shared);
  if (threadIdx.x == 0) {
    *loss = float(l / double(n));
    *correct = int64_t(h);
  }
}

__global__ void ce_backward_kernel(int64_t n, int64_t classes, const float* dloss, const float* probs,
                                   const int64_t* labels, float* dlogits) {
  const int64_t total = n * classes;
  const float s = *dloss / float(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / classes, j = i % classes;
    dlogits[i] = s * (probs[i] - (labels[r] == j ? 1.f : 0.f));
  }
}

__global__ void sgd_kernel(int64_t n, cpu::SgdParams h, bool first, float* p, const float* g, float* buf) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float d = g[i] + h.weight_decay * p[i];
    if (h.momentum != 0.f) {
      buf[i] = first ? d : h.momentum * buf[i] + (1.f - h.dampening) * d;
      d = h.nesterov ? d + h.momentum * buf[i] : buf[i];
    }
    p[i] -= h.lr * d;
  }
}

__global__ void adamw_kernel(int64_t n, cpu::AdamWParams h, float step_size, float bias2_sqrt, float* p,
                             const float* g, float* m, float* v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    p[i] *= 1.f - h.lr * h.weight_decay;
    m[i] = h.beta1 * m[i] + (1.f - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1.f - h.beta2) * g[i] * g[i];
    p[i] -= step_size * m[i] / (sqrtf(v[i]) / bias2_sqrt + h.eps);
  }
}

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 132 * 16)); }

}  // namespace

void batchnorm_forward_train(const BatchNormShape& s, const float* x, const float* gamma, const float* beta, float eps,
                             float momentum, float* running_mean, float* running_var, float* y, float* save_mean,
                             float* save_invstd, Activation act, Stream stream) {
  bn_train_forward_kernel<<<int(s.c), kThreads, 0, as_cuda(stream)>>>(s, x, gamma, beta, eps, momentum, running_mean,
                                                                       running_var, y, save_mean, save_invstd, act);
  CG_CUDA_AFTER_LAUNCH("bn_train_forward_kernel");
}

void batchnorm_forward_eval(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps, float* y, Activation act,
                            Stream stream) {
  bn_eval_forward_kernel<<<blocks_for(s.n * s.c * s.hw), kThreads, 0, as_cuda(stream)>>>(
      s, x, gamma, beta, running_mean, running_var, eps, y, act);
  CG_CUDA_AFTER_LAUNCH("bn_eval_forward_kernel");
}

void batchnorm_backward_train(const BatchNormShape& s, const float* dy, const float* x, const float* gamma,
                              const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                              const float* relu_y, Stream stream) {
  bn_train_backward_kernel<<<int(s.c), kThreads, 0, as_cuda(stream)>>>(s, dy, x, gamma, save_mean, save_invstd, dx,
                                                                        dgamma, dbeta, relu_y);
  CG_CUDA_AFTER_LAUNCH("bn_train_backward_kernel");
}

void global_avg_pool_forward(int64_t nc, int64_t hw, const float* x, float* y, Stream stream) {
  avg_pool_forward_kernel<<<blocks_for(nc), kThreads, 0, as_cuda(stream)>>>(nc, hw, x, y);
  CG_CUDA_AFTER_LAUNCH("avg_pool_forward_kernel");
}

void global_avg_pool_backward(int64_t nc, int64_t hw, const float* dy, float* dx, Stream stream) {
  avg_pool_backward_kernel<<<blocks_for(nc * hw), kThreads, 0, as_cuda(stream)>>>(nc, hw, dy, dx);
  CG_CUDA_AFTER_LAUNCH("avg_pool_backward_kernel");
}

void cross_entropy_forward(int64_t n, int64_t classes, const float* logits, const int64_t* labels, float* loss,
                           float* probs, int64_t* correct, Stream stream) {
  // Per-row scratch from the stream-ordered pool: freed in stream order after the reduction.
  double* row_loss = nullptr;
  int64_t* row_hit = nullptr;
  CG_CUDA_CHECK(cudaMallocAsync(&row_loss, size_t(n) * sizeof(double), as_cuda(stream)));
  CG_CUDA_CHECK(cudaMallocAsync(&row_hit, size_t(n) * sizeof(int64_t), as_cuda(stream)));
  ce_rows_kernel<<<int((n + kThreads - 1) / kThreads), kThreads, 0, as_cuda(stream)>>>(n, classes, logits, labels,
                                                                                       probs, row_loss, row_hit);
  CG_CUDA_AFTER_LAUNCH("ce_rows_kernel");
  ce_reduce_kernel<<<1, kThreads, 0, as_cuda(stream)>>>(n, row_loss, row_hit, loss, correct);
  CG_CUDA_AFTER_LAUNCH("ce_reduce_kernel");
  CG_CUDA_CHECK(cudaFreeAsync(row_loss, as_cuda(stream)));
  CG_CUDA_CHECK(cudaFreeAsync(row_hit, as_cuda(stream)));
}

void cross_entropy_backward(int64_t n, int64_t classes, const float* dloss, const float* probs, const int64_t* labels,
                            float* dlogits, Stream stream) {
  ce_backward_kernel<<<blocks_for(n * classes), kThreads, 0, as_cuda(stream)>>>(n, classes, dloss, probs, labels,
                                                                                dlogits);
  CG_CUDA_AFTER_LAUNCH("ce_backward_kernel");
}

void sgd_update(int64_t n, const cpu::SgdParams& h, bool first_step, float* param, const float* grad,
                float* momentum_buf, Stream stream) {
  sgd_kernel<<<blocks_for(n), kThreads, 0, as_cuda(stream)>>>(n, h, first_step, param, grad, momentum_buf);
  CG_CUDA_AFTER_LAUNCH("sgd_kernel");
}

void adamw_update(int64_t n, const cpu::AdamWParams& h, int64_t step, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, Stream stream) {
  const float bias1 = 1.f - std::pow(h.beta1, float(step));
  const float bias2_sqrt = std::sqrt(1.f - std::pow(h.beta2, float(step)));
  adamw_kernel<<<blocks_for(n), kThreads, 0, as_cuda(stream)>>>(n, h, h.lr / bias1, bias2_sqrt, param, grad, exp_avg,
                                                                exp_avg_sq);
  CG_CUDA_AFTER_LAUNCH("adamw_kernel");
}

}  // namespace cg::kernels::cuda
