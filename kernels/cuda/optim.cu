// Multi-tensor optimizer and mixed-precision kernels. A launch covers up to kPack tensors: their
// pointers travel in the kernel's parameter block, blockIdx.y picks the tensor and blocks stride
// over its elements. Every kernel first reads found_inf (when given) and does nothing if it is
// set, which is how an overflowed fp16 step is skipped without the host looking.
#include <cmath>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/optim.h"

namespace cg::kernels::cuda {
namespace {

constexpr int kPack = 32;  // 32 slots: about 1.3 KB of kernel parameters, well under the 4 KB limit

struct Pack {
  int count = 0;
  int64_t n[kPack];
  float* param[kPack];
  const float* grad[kPack];
  float* state1[kPack];
  float* state2[kPack];
};

__device__ __forceinline__ bool skipped(const float* found_inf) { return found_inf && *found_inf != 0.f; }

__global__ void sgd_kernel(Pack pk, cpu::SgdParams h, bool first, const float* found_inf) {
  if (skipped(found_inf)) return;
  const int t = blockIdx.y;
  const int64_t n = pk.n[t];
  float* p = pk.param[t];
  const float* g = pk.grad[t];
  float* buf = pk.state1[t];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float d = g[i] + h.weight_decay * p[i];
    if (h.momentum != 0.f) {
      buf[i] = first ? d : h.momentum * buf[i] + (1.f - h.dampening) * d;
      d = h.nesterov ? d + h.momentum * buf[i] : buf[i];
    }
    p[i] -= h.lr * d;
  }
}

__global__ void adamw_kernel(Pack pk, cpu::AdamWParams h, const int64_t* step, const float* found_inf) {
  if (skipped(found_inf)) return;
  const double t_step = double(*step);
  const float step_size = float(double(h.lr) / (1.0 - pow(double(h.beta1), t_step)));
  const float bias2_sqrt = float(sqrt(1.0 - pow(double(h.beta2), t_step)));
  const int t = blockIdx.y;
  const int64_t n = pk.n[t];
  float *p = pk.param[t], *m = pk.state1[t], *v = pk.state2[t];
  const float* g = pk.grad[t];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    p[i] *= 1.f - h.lr * h.weight_decay;
    m[i] = h.beta1 * m[i] + (1.f - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1.f - h.beta2) * g[i] * g[i];
    p[i] -= step_size * m[i] / (sqrtf(v[i]) / bias2_sqrt + h.eps);
  }
}

__global__ void unscale_kernel(Pack pk, const float* inv_scale, float* found_inf) {
  const int t = blockIdx.y;
  const int64_t n = pk.n[t];
  float* g = pk.param[t];
  const float inv = *inv_scale;
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = g[i] * inv;
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (bad) *found_inf = 1.f;  // only ever set: concurrent writers all write the same value
}

__global__ void advance_step_kernel(int64_t* step, const float* found_inf) {
  if (!skipped(found_inf)) *step += 1;
}

__global__ void update_scale_kernel(float* scale, float* inv_scale, int64_t* tracker, const float* found_inf,
                                    float growth, float backoff, int64_t interval) {
  if (*found_inf != 0.f) {
    *scale *= backoff;
    *tracker = 0;
  } else if (++*tracker == interval) {
    *scale *= growth;
    *tracker = 0;
  }
  *inv_scale = 1.f / *scale;
}

// Launches `launch(pack, grid)` over the tensors kPack at a time.
template <typename Launch>
void for_packs(const std::vector<TensorSlot>& tensors, Launch&& launch) {
  for (size_t first = 0; first < tensors.size(); first += kPack) {
    Pack pk;
    int64_t largest = 0;
    for (size_t i = first; i < tensors.size() && pk.count < kPack; ++i, ++pk.count) {
      const TensorSlot& s = tensors[i];
      pk.n[pk.count] = s.n;
      pk.param[pk.count] = s.param;
      pk.grad[pk.count] = s.grad;
      pk.state1[pk.count] = s.state1;
      pk.state2[pk.count] = s.state2;
      largest = std::max(largest, s.n);
    }
    // Blocks per tensor: enough for the largest, capped so a pack fills the GPU a few times over.
    const int per_tensor = int(std::min<int64_t>((largest + kThreads - 1) / kThreads, 264));
    launch(pk, dim3(unsigned(std::max(per_tensor, 1)), unsigned(pk.count)));
  }
}

}  // namespace

void sgd_update_multi(const std::vector<TensorSlot>& tensors, const cpu::SgdParams& h, bool first_step,
                      const float* found_inf, Stream stream) {
  for_packs(tensors, [&](const Pack& pk, dim3 grid) {
    sgd_kernel<<<grid, kThreads, 0, as_cuda(stream)>>>(pk, h, first_step, found_inf);
    CG_CUDA_AFTER_LAUNCH("sgd_kernel");
  });
}

void adamw_update_multi(const std::vector<TensorSlot>& tensors, const cpu::AdamWParams& h, const int64_t* step,
                        const float* found_inf, Stream stream) {
  for_packs(tensors, [&](const Pack& pk, dim3 grid) {
    adamw_kernel<<<grid, kThreads, 0, as_cuda(stream)>>>(pk, h, step, found_inf);
    CG_CUDA_AFTER_LAUNCH("adamw_kernel");
  });
}

void advance_step(int64_t* step, const float* found_inf, Stream stream) {
  advance_step_kernel<<<1, 1, 0, as_cuda(stream)>>>(step, found_inf);
  CG_CUDA_AFTER_LAUNCH("advance_step_kernel");
}

void unscale_and_check_multi(const std::vector<TensorSlot>& grads, const float* inv_scale, float* found_inf,
                             Stream stream) {
  for_packs(grads, [&](const Pack& pk, dim3 grid) {
    unscale_kernel<<<grid, kThreads, 0, as_cuda(stream)>>>(pk, inv_scale, found_inf);
    CG_CUDA_AFTER_LAUNCH("unscale_kernel");
  });
}

void update_loss_scale(float* scale, float* inv_scale, int64_t* growth_tracker, const float* found_inf,
                       float growth_factor, float backoff_factor, int64_t growth_interval, Stream stream) {
  update_scale_kernel<<<1, 1, 0, as_cuda(stream)>>>(scale, inv_scale, growth_tracker, found_inf, growth_factor,
                                                    backoff_factor, growth_interval);
  CG_CUDA_AFTER_LAUNCH("update_scale_kernel");
}

}  // namespace cg::kernels::cuda
