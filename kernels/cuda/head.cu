// The classifier head on the GPU: global average pooling (f32/f16/bf16, fp32 sums, a warp per
// row; channels-last: a thread per channel) and cross-entropy in float32. The loss is one block's
// work: batches have hundreds of rows of ten classes, and a single block sums them in a fixed
// order (deterministic) with no scratch memory.
#include <math_constants.h>

#include "kernels/cuda/device_error.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/head.h"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda {
namespace {

// One warp per (image, channel) row: lanes read the row together (coalesced) and the warp adds
// their sums in a fixed butterfly order. r is the same for the whole warp (blocks are whole warps),
// so every lane reaches the shuffles.
template <typename T>
__global__ void pool_forward_kernel(int64_t nc, int64_t hw, const T* x, T* y) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; r < nc; r += warps) {
    float s = 0;
    for (int64_t j = lane; j < hw; j += 32) s += to_f32(x[r * hw + j]);
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) y[r] = from_f32<T>(s / float(hw));
  }
}

template <typename T>
__global__ void pool_backward_kernel(int64_t nc, int64_t hw, const T* dy, T* dx) {
  const int64_t total = nc * hw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = from_f32<T>(to_f32(dy[i / hw]) / float(hw));
}

template <typename T>
struct PoolForward {
  static void run(int64_t nc, int64_t hw, const void* x, void* y, Stream s) {
    launch_kernel(pool_forward_kernel<T>, "pool_forward_kernel", blocks_for(nc * 32), kThreads, 0, as_cuda(s), nc, hw,
                  static_cast<const T*>(x), static_cast<T*>(y));
  }
};

template <typename T>
struct PoolBackward {
  static void run(int64_t nc, int64_t hw, const void* dy, void* dx, Stream s) {
    launch_kernel(pool_backward_kernel<T>, "pool_backward_kernel", blocks_for(nc * hw), kThreads, 0, as_cuda(s), nc, hw,
                  static_cast<const T*>(dy), static_cast<T*>(dx));
  }
};

// Channels-last: a thread per (image, channel), walking the image's hw rows in order; neighbouring
// threads read neighbouring channels of a row, so each step of the walk is one coalesced read.
template <typename T>
__global__ void pool_nhwc_forward_kernel(int64_t n, int64_t hw, int64_t c, const T* x, T* y) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < n * c; r += int64_t(gridDim.x) * blockDim.x) {
    const T* image = x + (r / c) * hw * c + r % c;
    float s = 0;
    for (int64_t j = 0; j < hw; ++j) s += to_f32(image[j * c]);
    y[r] = from_f32<T>(s / float(hw));
  }
}

template <typename T>
__global__ void pool_nhwc_backward_kernel(int64_t n, int64_t hw, int64_t c, const T* dy, T* dx) {
  const int64_t total = n * hw * c;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = from_f32<T>(to_f32(dy[i / (hw * c) * c + i % c]) / float(hw));
}

template <typename T>
struct PoolNhwcForward {
  static void run(int64_t n, int64_t hw, int64_t c, const void* x, void* y, Stream s) {
    launch_kernel(pool_nhwc_forward_kernel<T>, "pool_nhwc_forward_kernel", blocks_for(n * c), kThreads, 0, as_cuda(s),
                  n, hw, c, static_cast<const T*>(x), static_cast<T*>(y));
  }
};

template <typename T>
struct PoolNhwcBackward {
  static void run(int64_t n, int64_t hw, int64_t c, const void* dy, void* dx, Stream s) {
    launch_kernel(pool_nhwc_backward_kernel<T>, "pool_nhwc_backward_kernel", blocks_for(n * hw * c), kThreads, 0,
                  as_cuda(s), n, hw, c, static_cast<const T*>(dy), static_cast<T*>(dx));
  }
};

// The first label outside [0, classes) goes to the host's error record (device_error.h): claim
// it, fill it, make that visible to the host, then publish the code.
__device__ void report_bad_label(DeviceErrorRecord* record, int64_t label, int64_t row, int64_t classes) {
  if (atomicCAS(&record->claimed, 0, 1) != 0) return;
  record->value = label;
  record->index = row;
  record->limit = classes;
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&record->code) = kLabelOutOfRange;
}

// One block: thread t handles rows t, t + 256, ... (softmax stabilized by the row's max; the
// argmax is the first maximum, as on the CPU), then the block sums loss and hits. A row whose
// label is out of range is reported and makes the loss NaN instead of reading outside the row.
__global__ void ce_forward_kernel(int64_t n, int64_t classes, const float* logits, const int64_t* labels, float* loss,
                                  float* probs, int64_t* correct, DeviceErrorRecord* errors) {
  CG_SHARED(double, shared, [kThreads]);
  double l = 0, h = 0;
  for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
    const float* z = logits + r * classes;
    int64_t arg = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (z[j] > z[arg]) arg = j;
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += exp(double(z[j] - z[arg]));
    for (int64_t j = 0; j < classes; ++j) probs[r * classes + j] = float(exp(double(z[j] - z[arg])) / sum);
    const int64_t label = labels[r];
    if (label < 0 || label >= classes) {
      report_bad_label(errors, label, r, classes);
      l = CUDART_NAN;
      continue;
    }
    l += log(sum) - double(z[label] - z[arg]);
    h += arg == label ? 1.0 : 0.0;
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

}  // namespace

void global_avg_pool_forward(int64_t nc, int64_t hw, DType dtype, const void* x, void* y, Stream stream) {
  if (nc > 0) dispatch_floating<PoolForward>("global_avg_pool_forward", dtype, nc, hw, x, y, stream);
}

void global_avg_pool_backward(int64_t nc, int64_t hw, DType dtype, const void* dy, void* dx, Stream stream) {
  if (nc > 0) dispatch_floating<PoolBackward>("global_avg_pool_backward", dtype, nc, hw, dy, dx, stream);
}

void global_avg_pool_nhwc_forward(int64_t n, int64_t hw, int64_t c, DType dtype, const void* x, void* y,
                                  Stream stream) {
  if (n * c > 0) dispatch_floating<PoolNhwcForward>("global_avg_pool_nhwc_forward", dtype, n, hw, c, x, y, stream);
}

void global_avg_pool_nhwc_backward(int64_t n, int64_t hw, int64_t c, DType dtype, const void* dy, void* dx,
                                   Stream stream) {
  if (n * hw * c > 0)
    dispatch_floating<PoolNhwcBackward>("global_avg_pool_nhwc_backward", dtype, n, hw, c, dy, dx, stream);
}

void cross_entropy_forward(int64_t n, int64_t classes, const float* logits, const int64_t* labels, float* loss,
                           float* probs, int64_t* correct, Stream stream) {
  launch_kernel(ce_forward_kernel, "ce_forward_kernel", 1, kThreads, 0, as_cuda(stream), n, classes, logits, labels,
                loss, probs, correct, device_error_record());
}

void cross_entropy_backward(int64_t n, int64_t classes, const float* dloss, const float* probs,
                            const int64_t* labels, float* dlogits, Stream stream) {
  launch_kernel(ce_backward_kernel, "ce_backward_kernel", blocks_for(n * classes), kThreads, 0, as_cuda(stream), n,
                classes, dloss, probs, labels, dlogits);
}

}  // namespace cg::kernels::cuda
