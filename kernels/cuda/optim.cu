// Multi-tensor optimizer and mixed-precision kernels. One launch covers up to kSlots tensors:
// their pointers travel in the kernel's parameter block (a __grid_constant__ struct, read in
// place from constant memory), and every block updates one (tensor, chunk of kChunk elements)
// pair, so a 64-element bias costs one block and a 600k-element weight about 150, with no idle
// blocks. Longer lists take more launches. Every update first reads found_inf (when given) and
// does nothing if it is set: an overflowed fp16 step is skipped without the host looking.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/optim.h"

namespace cg::kernels::cuda {
namespace {

constexpr int kSlots = 64;        // MiniResNet's 47 parameters in one launch; the pack is ~2.8 KB
constexpr int64_t kChunk = 4096;  // elements per block: 16 per thread

struct Pack {
  int count = 0;
  // Tensor t owns blocks [first_block[t], first_block[t + 1]), one per chunk.
  int first_block[kSlots + 1];
  int64_t n[kSlots];
  float* param[kSlots];
  const float* grad[kSlots];
  float* state1[kSlots];
  float* state2[kSlots];
};

// The (tensor, element range) of this block: the last t with first_block[t] <= blockIdx.x, by
// binary search (the same for the whole block, so no divergence).
struct Work {
  int t;
  int64_t begin, end;
  __device__ explicit Work(const Pack& pk) {
    const int b = int(blockIdx.x);
    int lo = 0, hi = pk.count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (pk.first_block[mid] <= b) lo = mid;
      else hi = mid - 1;
    }
    t = lo;
    begin = int64_t(b - pk.first_block[t]) * kChunk;
    end = min(pk.n[t], begin + kChunk);
  }
};

__device__ __forceinline__ bool skipped(const float* found_inf) { return found_inf && *found_inf != 0.f; }

// The learning rate: from device memory when given (a replayed CUDA graph's kernel arguments are
// frozen, the scalar is not), else the launch's. Either way the same float.
__device__ __forceinline__ float learning_rate(float from_launch, const float* device_lr) {
  return device_lr ? *device_lr : from_launch;
}

// kernels/cpu/optim.cpp's sgd_update, element for element.
__global__ void sgd_kernel(const __grid_constant__ Pack pk, SgdOptions h, bool first, const float* found_inf,
                           const float* device_lr) {
  if (skipped(found_inf)) return;
  const float lr = learning_rate(h.lr, device_lr);
  const Work w(pk);
  float* p = pk.param[w.t];
  const float* g = pk.grad[w.t];
  float* buf = pk.state1[w.t];
  const float keep = 1.f - h.dampening;
  for (int64_t i = w.begin + threadIdx.x; i < w.end; i += blockDim.x) {
    const float d = g[i] + h.weight_decay * p[i];
    if (h.momentum == 0.f) {
      p[i] -= lr * d;
    } else {
      const float b = first ? d : h.momentum * buf[i] + keep * d;
      buf[i] = b;
      p[i] -= lr * (h.nesterov ? d + h.momentum * b : b);
    }
  }
}

// kernels/cpu/optim.cpp's adamw_update, with the per-step scalars computed here from *step, in
// double precision and rounded once, like the CPU (and PyTorch, which does it in Python floats).
__global__ void adamw_kernel(const __grid_constant__ Pack pk, AdamWOptions h, const int64_t* step,
                             const float* found_inf, const float* device_lr) {
  if (skipped(found_inf)) return;
  const double lr = double(learning_rate(h.lr, device_lr));
  const double t_step = double(*step);
  const float step_size = float(lr / (1.0 - pow(double(h.beta1), t_step)));
  const float bias2_sqrt = float(sqrt(1.0 - pow(double(h.beta2), t_step)));
  const float decay = float(1.0 - lr * double(h.weight_decay));
  const float one_minus_b1 = float(1.0 - double(h.beta1)), one_minus_b2 = float(1.0 - double(h.beta2));
  const Work w(pk);
  float *p = pk.param[w.t], *m = pk.state1[w.t], *v = pk.state2[w.t];
  const float* g = pk.grad[w.t];
  for (int64_t i = w.begin + threadIdx.x; i < w.end; i += blockDim.x) {
    const float gi = g[i];
    const float mi = h.beta1 * m[i] + one_minus_b1 * gi;
    const float vi = h.beta2 * v[i] + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bias2_sqrt + h.eps);
  }
}

// g *= inv_scale in place (the slot's `param`), found_inf = 1 on any inf/NaN result. Only ever
// writes 1, so blocks racing on found_inf all write the same value; one write per block at most.
// Inside the block the flag is set atomically: plain stores of the same value from several threads
// are a write-write race to compute-sanitizer's racecheck and to the emulator's shared-memory check.
__global__ void unscale_kernel(const __grid_constant__ Pack pk, const float* inv_scale, float* found_inf) {
  CG_SHARED(int, bad_in_block, );
  if (threadIdx.x == 0) bad_in_block = 0;
  __syncthreads();
  const Work w(pk);
  float* g = pk.param[w.t];
  const float inv = *inv_scale;
  bool bad = false;
  for (int64_t i = w.begin + threadIdx.x; i < w.end; i += blockDim.x) {
    const float v = g[i] * inv;
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (bad) atomicOr(&bad_in_block, 1);
  __syncthreads();
  if (threadIdx.x == 0 && bad_in_block) *found_inf = 1.f;
}

__global__ void advance_step_kernel(int64_t* step, const float* found_inf) {
  if (!skipped(found_inf)) *step += 1;
}

__global__ void update_scale_kernel(float* scale, float* inv_scale, int64_t* tracker, const float* found_inf,
                                    float growth, float backoff, int64_t interval) {
  if (*found_inf != 0.f) {
    *scale *= backoff;
    *tracker = 0;
  } else if (++*tracker >= interval) {
    const float grown = *scale * growth;
    if (isfinite(grown)) *scale = grown;  // like PyTorch: never grow to inf
    *tracker = 0;
  }
  *inv_scale = 1.f / *scale;
}

// Launches `launch(pack, blocks)` over the tensors, kSlots at a time; empty tensors are left out.
template <typename Launch>
void for_packs(const std::vector<TensorSlot>& tensors, Launch&& launch) {
  size_t i = 0;
  while (i < tensors.size()) {
    Pack pk;
    int64_t blocks = 0;
    for (; i < tensors.size() && pk.count < kSlots; ++i) {
      const TensorSlot& s = tensors[i];
      if (s.n <= 0) continue;
      const int64_t chunks = (s.n + kChunk - 1) / kChunk;
      if (blocks + chunks > int64_t(INT32_MAX)) {
        if (pk.count == 0) throw Error(fmt::format("multi-tensor update: a tensor of {} elements is too large", s.n));
        break;  // this tensor starts the next launch
      }
      pk.first_block[pk.count] = int(blocks);
      pk.n[pk.count] = s.n;
      pk.param[pk.count] = s.param;
      pk.grad[pk.count] = s.grad;
      pk.state1[pk.count] = s.state1;
      pk.state2[pk.count] = s.state2;
      ++pk.count;
      blocks += chunks;
    }
    pk.first_block[pk.count] = int(blocks);
    if (pk.count > 0) launch(pk, unsigned(blocks));
  }
}

}  // namespace

void sgd_update_multi(const std::vector<TensorSlot>& tensors, const SgdOptions& h, bool first_step,
                      const float* found_inf, Stream stream, const float* device_lr) {
  for_packs(tensors, [&](const Pack& pk, unsigned blocks) {
    launch_kernel(sgd_kernel, "sgd_kernel", blocks, kThreads, 0, as_cuda(stream), pk, h, first_step, found_inf,
                  device_lr);
  });
}

void adamw_update_multi(const std::vector<TensorSlot>& tensors, const AdamWOptions& h, const int64_t* step,
                        const float* found_inf, Stream stream, const float* device_lr) {
  for_packs(tensors, [&](const Pack& pk, unsigned blocks) {
    launch_kernel(adamw_kernel, "adamw_kernel", blocks, kThreads, 0, as_cuda(stream), pk, h, step, found_inf,
                  device_lr);
  });
}

void advance_step(int64_t* step, const float* found_inf, Stream stream) {
  launch_kernel(advance_step_kernel, "advance_step_kernel", 1, 1, 0, as_cuda(stream), step, found_inf);
}

void unscale_and_check_multi(const std::vector<TensorSlot>& grads, const float* inv_scale, float* found_inf,
                             Stream stream) {
  for_packs(grads, [&](const Pack& pk, unsigned blocks) {
    launch_kernel(unscale_kernel, "unscale_kernel", blocks, kThreads, 0, as_cuda(stream), pk, inv_scale, found_inf);
  });
}

void update_loss_scale(float* scale, float* inv_scale, int64_t* growth_tracker, const float* found_inf,
                       float growth_factor, float backoff_factor, int64_t growth_interval, Stream stream) {
  launch_kernel(update_scale_kernel, "update_scale_kernel", 1, 1, 0, as_cuda(stream), scale, inv_scale, growth_tracker,
                found_inf, growth_factor, backoff_factor, growth_interval);
}

}  // namespace cg::kernels::cuda
