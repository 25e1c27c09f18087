// Batch norm on the GPU in three kernels per direction, so that every SM has work even with 64
// channels: (1) partial sums over slices of each channel, one block per (slice, channel); (2) one
// thread per channel adds its slices' partials in slice order (deterministic run to run) and
// derives the statistics; (3) an elementwise pass normalizes (or computes dx). Sums are in double,
// activations may be half, all other arithmetic is fp32.
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/dtype.cuh"

namespace cg::kernels::cuda {
namespace {

// Slices per channel: about 8 blocks per SM on an H100 in all, none shorter than 4096 values.
int slices_for(const BatchNormShape& s) {
  const int64_t m = s.n * s.hw;
  const int64_t want = (8 * 132 + s.c - 1) / s.c, most = std::max<int64_t>(1, m / 4096);
  return int(std::max<int64_t>(1, std::min(want, most)));
}

// Element j of channel c: x[(i * C + c) * HW + p] for j = i * HW + p.
__device__ __forceinline__ int64_t channel_index(const BatchNormShape& s, int64_t c, int64_t j) {
  return ((j / s.hw) * s.c + c) * s.hw + j % s.hw;
}

// The gradient reaching the normalization: dy, masked where a fused ReLU's output was zero.
template <typename T>
__device__ __forceinline__ float grad_in(const T* dy, const T* relu_y, int64_t i) {
  return relu_y && !(to_f32(relu_y[i]) > 0.f) ? 0.f : to_f32(dy[i]);
}

// The slice of channel c that block (z = blockIdx.x) covers.
struct Slice {
  int64_t begin, end;
  __device__ Slice(int64_t m, int slices) {
    const int64_t per = (m + slices - 1) / slices;
    begin = min(m, int64_t(blockIdx.x) * per);
    end = min(m, begin + per);
  }
};

// partial[c][z] = (sum x, sum x^2) over the slice.
template <typename T>
__global__ void stats_partial_kernel(BatchNormShape s, const T* x, int slices, double2* partial) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.y;
  const Slice sl(s.n * s.hw, slices);
  double sum = 0, sq = 0;
  for (int64_t j = sl.begin + threadIdx.x; j < sl.end; j += blockDim.x) {
    const double v = to_f32(x[channel_index(s, c, j)]);
    sum += v;
    sq += v * v;
  }
  sum = block_sum(sum, shared);
  sq = block_sum(sq, shared);
  if (threadIdx.x == 0) partial[c * slices + blockIdx.x] = make_double2(sum, sq);
}

__global__ void stats_finalize_kernel(BatchNormShape s, int slices, const double2* partial, float eps,
                                      float momentum, float* running_mean, float* running_var, float* save_mean,
                                      float* save_invstd) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= s.c) return;
  const double m = double(s.n * s.hw);
  double sum = 0, sq = 0;
  for (int z = 0; z < slices; ++z) {
    sum += partial[c * slices + z].x;
    sq += partial[c * slices + z].y;
  }
  const double mean = sum / m, var = fmax(sq / m - mean * mean, 0.0);  // biased: normalization
  save_mean[c] = float(mean);
  save_invstd[c] = float(1.0 / sqrt(var + double(eps)));
  if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * float(mean);
  if (running_var) {
    const double unbiased = m > 1 ? var * m / (m - 1) : var;
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * float(unbiased);
  }
}

// y = (x - mean) * invstd * gamma + beta, with invstd from var + eps when var is given (eval).
template <typename T>
__global__ void normalize_kernel(BatchNormShape s, const T* x, const float* gamma, const float* beta,
                                 const float* mean, const float* invstd, const float* var, float eps, T* y,
                                 Activation act) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / s.hw) % s.c;
    const float scale = gamma[c] * (var ? rsqrtf(var[c] + eps) : invstd[c]);
    const float v = (to_f32(x[i]) - mean[c]) * scale + beta[c];
    y[i] = from_f32<T>(act == Activation::relu ? fmaxf(v, 0.f) : v);
  }
}

// partial[c][z] = (sum g, sum g * xhat) over the slice.
template <typename T>
__global__ void grad_partial_kernel(BatchNormShape s, const T* dy, const T* x, const T* relu_y, const float* mean,
                                    const float* invstd, const float* var, float eps, int slices, double2* partial) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.y;
  const Slice sl(s.n * s.hw, slices);
  const float mu = mean[c], is = var ? rsqrtf(var[c] + eps) : invstd[c];
  double sg = 0, sgx = 0;
  for (int64_t j = sl.begin + threadIdx.x; j < sl.end; j += blockDim.x) {
    const int64_t i = channel_index(s, c, j);
    const float g = grad_in(dy, relu_y, i);
    sg += g;
    sgx += double(g) * double((to_f32(x[i]) - mu) * is);
  }
  sg = block_sum(sg, shared);
  sgx = block_sum(sgx, shared);
  if (threadIdx.x == 0) partial[c * slices + blockIdx.x] = make_double2(sg, sgx);
}

__global__ void grad_finalize_kernel(BatchNormShape s, int slices, const double2* partial, float* dgamma,
                                     float* dbeta) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= s.c) return;
  double sg = 0, sgx = 0;
  for (int z = 0; z < slices; ++z) {
    sg += partial[c * slices + z].x;
    sgx += partial[c * slices + z].y;
  }
  dbeta[c] = float(sg);
  dgamma[c] = float(sgx);
}

// training: dx = k (g - mean(g) - xhat mean(g xhat)), with mean(g) = dbeta / m and
// mean(g xhat) = dgamma / m; eval (statistics constant): dx = k g.
template <typename T>
__global__ void grad_input_kernel(BatchNormShape s, bool training, const T* dy, const T* x, const T* relu_y,
                                  const float* gamma, const float* mean, const float* invstd, const float* var,
                                  float eps, const float* dgamma, const float* dbeta, T* dx) {
  const int64_t total = s.n * s.c * s.hw;
  const float inv_m = 1.f / float(s.n * s.hw);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / s.hw) % s.c;
    const float is = var ? rsqrtf(var[c] + eps) : invstd[c], k = gamma[c] * is, g = grad_in(dy, relu_y, i);
    const float r = training ? k * (g - dbeta[c] * inv_m - (to_f32(x[i]) - mean[c]) * is * dgamma[c] * inv_m) : k * g;
    dx[i] = from_f32<T>(r);
  }
}

int channel_blocks(const BatchNormShape& s) { return int((s.c + kThreads - 1) / kThreads); }

template <typename T>
struct Forward {
  static void run(const BatchNormShape& s, bool training, const void* x_, const float* gamma, const float* beta,
                  float eps, float momentum, float* rm, float* rv, void* y_, float* sm, float* si, Activation act,
                  Stream st) {
    const T* x = static_cast<const T*>(x_);
    const int64_t total = s.n * s.c * s.hw;
    if (!training) {  // running statistics: one pass
      normalize_kernel<T><<<blocks_for(total), kThreads, 0, as_cuda(st)>>>(s, x, gamma, beta, rm, nullptr, rv, eps,
                                                                            static_cast<T*>(y_), act);
      CG_CUDA_AFTER_LAUNCH("batchnorm normalize_kernel");
      return;
    }
    const int slices = slices_for(s);
    auto* partial = static_cast<double2*>(scratch_alloc(size_t(s.c * slices) * sizeof(double2), st));
    stats_partial_kernel<T><<<dim3(unsigned(slices), unsigned(s.c)), kThreads, 0, as_cuda(st)>>>(s, x, slices, partial);
    CG_CUDA_AFTER_LAUNCH("batchnorm stats_partial_kernel");
    stats_finalize_kernel<<<channel_blocks(s), kThreads, 0, as_cuda(st)>>>(s, slices, partial, eps, momentum, rm, rv,
                                                                            sm, si);
    CG_CUDA_AFTER_LAUNCH("batchnorm stats_finalize_kernel");
    scratch_free(partial, st);
    normalize_kernel<T><<<blocks_for(total), kThreads, 0, as_cuda(st)>>>(s, x, gamma, beta, sm, si, nullptr, eps,
                                                                          static_cast<T*>(y_), act);
    CG_CUDA_AFTER_LAUNCH("batchnorm normalize_kernel");
  }
};

template <typename T>
struct Backward {
  static void run(const BatchNormShape& s, bool training, const void* dy_, const void* x_, const float* gamma,
                  const float* mean, const float* invstd, const float* var, float eps, void* dx, float* dgamma,
                  float* dbeta, const void* relu_y_, Stream st) {
    const T *dy = static_cast<const T*>(dy_), *x = static_cast<const T*>(x_), *relu_y = static_cast<const T*>(relu_y_);
    const int slices = slices_for(s);
    auto* partial = static_cast<double2*>(scratch_alloc(size_t(s.c * slices) * sizeof(double2), st));
    grad_partial_kernel<T><<<dim3(unsigned(slices), unsigned(s.c)), kThreads, 0, as_cuda(st)>>>(
        s, dy, x, relu_y, mean, invstd, var, eps, slices, partial);
    CG_CUDA_AFTER_LAUNCH("batchnorm grad_partial_kernel");
    grad_finalize_kernel<<<channel_blocks(s), kThreads, 0, as_cuda(st)>>>(s, slices, partial, dgamma, dbeta);
    CG_CUDA_AFTER_LAUNCH("batchnorm grad_finalize_kernel");
    scratch_free(partial, st);
    grad_input_kernel<T><<<blocks_for(s.n * s.c * s.hw), kThreads, 0, as_cuda(st)>>>(
        s, training, dy, x, relu_y, gamma, mean, invstd, var, eps, dgamma, dbeta, static_cast<T*>(dx));
    CG_CUDA_AFTER_LAUNCH("batchnorm grad_input_kernel");
  }
};

}  // namespace

void batchnorm_forward_train(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                             const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                             void* y, float* save_mean, float* save_invstd, Activation act, Stream stream) {
  dispatch_floating<Forward>("batchnorm_forward_train", dtype, s, true, x, gamma, beta, eps, momentum, running_mean,
                             running_var, y, save_mean, save_invstd, act, stream);
}

void batchnorm_forward_eval(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var, float eps,
                            void* y, Activation act, Stream stream) {
  dispatch_floating<Forward>("batchnorm_forward_eval", dtype, s, false, x, gamma, beta, eps, 0.f,
                             const_cast<float*>(running_mean), const_cast<float*>(running_var), y,
                             static_cast<float*>(nullptr), static_cast<float*>(nullptr), act, stream);
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
