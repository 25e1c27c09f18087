// Batch norm on the GPU, two kernels per direction: (1) a reduction, every block summing a slice
// of a channel's values (NCHW: one block per (slice, channel); channels-last: per (group of
// channels, slice of rows), batch_norm_rows.cuh) into stream-ordered scratch, and the last block
// of each channel (group) to arrive adding the slices' partials in slice order (deterministic run
// to run: bn::warp_sum_slices) and folding the statistics into per-channel coefficients; (2) an
// elementwise pass applies them (y = x * scale + shift, or dx). A residual (relu(bn(x) + r) ends
// every BasicBlock) is added in the second step, and its gradient written by the first backward
// step. Memory-bound, so activations move in 16- or 8-byte vectors whenever H*W (C, channels-last)
// and the pointers allow it; sums are fp32 within a thread's values and double across them, taken
// around a per-channel shift (no cancellation in the variance), all other arithmetic fp32.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/batch_norm_parts.cuh"
#include "kernels/cuda/batch_norm_rows.cuh"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda {
namespace {

using bn::load;
using bn::load_grad;
using bn::Slice;
using bn::store;

// ---------------------------------------------------------------------------------------------
// Index walking without a division per element. Vectors are counted per plane: hwv = H*W / V.

// The channel of vector k of a flat NCHW array, carried along as k grows by a fixed stride.
struct FlatCursor {
  int pv, c;            // vector within its plane; the plane's channel
  int step_pv, step_c;  // the stride as (planes mod C, vectors)
  int hwv, channels;
  __device__ FlatCursor(int64_t k, int64_t stride, int hwv_, int channels_) : hwv(hwv_), channels(channels_) {
    const int64_t plane = k / hwv;
    pv = int(k - plane * hwv);
    c = int(plane % channels);
    const int64_t q = stride / hwv;
    step_pv = int(stride - q * hwv);
    step_c = int(q % channels);
  }
  // k += stride: pv + step_pv < 2 hwv carries at most one plane, and c + step_c + 1 < 2 C.
  __device__ void advance() {
    pv += step_pv;
    c += step_c;
    if (pv >= hwv) {
      pv -= hwv;
      ++c;
    }
    if (c >= channels) c -= channels;
  }
};

// Vector j of channel c (j = image * hwv + pv) sits at flat vector (image * C + c) * hwv + pv.
// Walks the j of one block's slice with stride blockDim.x, carrying (image, pv).
struct ChannelCursor {
  int64_t image;
  int pv, step_pv;
  int64_t step_image;
  __device__ ChannelCursor(int64_t j, int hwv) {
    image = j / hwv;
    pv = int(j - image * hwv);
    step_image = int64_t(blockDim.x) / hwv;
    step_pv = int(int64_t(blockDim.x) - step_image * hwv);
  }
  __device__ int64_t element(int64_t c, int64_t channels, int hwv, int V) const {
    return ((image * channels + c) * hwv + pv) * V;
  }
  __device__ void advance(int hwv) {
    pv += step_pv;
    image += step_image;
    if (pv >= hwv) {
      pv -= hwv;
      ++image;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Kernels.

// The value variance sums are taken around: channel c's first element. Any value of the channel
// keeps sum (x - shift)^2 / m - mean(x - shift)^2 from cancelling when |mean| >> std.
template <typename T>
__device__ __forceinline__ float stats_shift(const BatchNormShape& s, const T* x, int64_t c) {
  return to_f32(x[c * s.hw]);
}

// The end both NCHW reductions share: the block's totals to partial[c][blockIdx.x], then the
// last of channel c's `slices` blocks to arrive adds them in slice order (its first warp,
// bn::warp_sum_slices) and hands the channel's totals to `finish`. `last` is one shared bool.
template <typename Finish>
__device__ void finish_channel_if_last(int64_t c, int slices, double2 block_totals, double2* partial,
                                       unsigned* arrivals, bool* last, const Finish& finish) {
  if (threadIdx.x == 0) partial[c * slices + blockIdx.x] = block_totals;
  if (!bn::last_to_arrive(arrivals + c, slices, last) || threadIdx.x >= 32) return;
  const double2 totals = bn::warp_sum_slices(partial + c * slices, slices);
  if (threadIdx.x == 0) finish(c, totals);
}

// Channel c's (sum d, sum d^2), d = x - shift, over slice blockIdx.x, then finish(c, totals) by
// the channel's last block.
template <typename T, int V, typename Finish>
__global__ void stats_partial_kernel(BatchNormShape s, int hwv, const T* x, int slices, double2* partial,
                                     unsigned* arrivals, Finish finish) {
  CG_SHARED(double, shared, [kThreads]);
  CG_SHARED(bool, last, [1]);
  const int64_t c = blockIdx.y;
  const Slice sl(s.n * hwv, slices, int(blockIdx.x));
  const float shift = stats_shift(s, x, c);
  double sum = 0, sq = 0;
  ChannelCursor at(sl.begin + threadIdx.x, hwv);
  for (int64_t j = sl.begin + threadIdx.x; j < sl.end; j += blockDim.x, at.advance(hwv)) {
    float v[V];
    load<V>(x + at.element(c, s.c, hwv, V), v);
    float vs = 0, vq = 0;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = v[k] - shift;
      vs += d;
      vq = fmaf(d, d, vq);
    }
    sum += vs;
    sq += vq;
  }
  sum = block_sum(sum, shared);
  sq = block_sum(sq, shared);
  finish_channel_if_last(c, slices, make_double2(sum, sq), partial, arrivals, last, finish);
}

// Channel c's saved statistics, running averages (unbiased variance, as PyTorch) and folded
// affine from its mean and biased variance over m values: the end both statistics kernels share.
__device__ inline void finish_channel_stats(int64_t c, double mean, double var, double m, const float* gamma,
                                            const float* beta, float eps, float momentum, float* running_mean,
                                            float* running_var, float* save_mean, float* save_invstd,
                                            float2* affine) {
  const float invstd = float(1.0 / sqrt(var + double(eps)));
  save_mean[c] = float(mean);
  save_invstd[c] = invstd;
  if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * float(mean);
  if (running_var) {
    const double unbiased = m > 1 ? var * m / (m - 1) : var;
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * float(unbiased);
  }
  const float scale = gamma[c] * invstd;
  affine[c] = make_float2(scale, beta[c] - float(mean) * scale);
}

// The per-channel ends of the reductions. Each takes channel c's totals over all slices (the
// shifted (sum d, sum d^2) of the statistics, or (sum g, sum g (x - mean)) of the gradient) and is
// called once per channel by the last block of a reduction (finish_channel_if_last for NCHW,
// batch_norm_rows.cuh's finish_group for channels-last).

// Training forward: the saved and running statistics and the folded affine (scale, shift) the
// normalize pass applies: y = x * scale + shift.
template <typename T>
struct StatsFinish {
  BatchNormShape s;
  const T* x;
  const float *gamma, *beta;
  float eps, momentum;
  float *running_mean, *running_var, *save_mean, *save_invstd;
  float2* affine;
  __device__ void operator()(int64_t c, double2 totals) const {
    const double m = double(s.n * s.hw), sum = totals.x, sq = totals.y;
    const double mean_d = sum / m, var = fmax(sq / m - mean_d * mean_d, 0.0);  // biased: normalization
    const double mean = double(stats_shift(s, x, c)) + mean_d;
    finish_channel_stats(c, mean, var, m, gamma, beta, eps, momentum, running_mean, running_var, save_mean,
                         save_invstd, affine);
  }
};

// Eval: the affine from the running statistics, as the CPU reference folds it.
__global__ void eval_affine_kernel(int64_t channels, const float* gamma, const float* beta, const float* running_mean,
                                   const float* running_var, float eps, float2* affine) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const float scale = gamma[c] / sqrtf(running_var[c] + eps);
  affine[c] = make_float2(scale, beta[c] - running_mean[c] * scale);
}

// y = finish(x * scale[c] + shift[c]) (residual and activation), one vector per thread and
// grid-stride step.
template <typename T, int V>
__global__ void affine_kernel(BatchNormShape s, int hwv, const T* x, const float2* affine, const T* residual, T* y,
                              bool relu) {
  const int64_t total = s.n * s.c * hwv, stride = int64_t(gridDim.x) * blockDim.x;
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= total) return;
  for (FlatCursor at(k, stride, hwv, int(s.c)); k < total; k += stride, at.advance()) {
    const float2 a = affine[at.c];
    float v[V], r[V];
    load<V>(x + k * V, v);
    if (residual) load<V>(residual + k * V, r);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = bn::finish_output<T>(fmaf(v[e], a.x, a.y), residual ? r : nullptr, e, relu);
    store<V>(y + k * V, v);
  }
}

// Channel c's (sum g, sum g * (x - mean)) over slice blockIdx.x, then finish(c, totals) by the
// channel's last block; `mean` is the saved batch mean (training) or the running mean (eval). g
// goes to d_residual too (see load_grad).
template <typename T, int V, typename Finish>
__global__ void grad_partial_kernel(BatchNormShape s, int hwv, const T* dy, const T* x, const T* relu_y,
                                    T* d_residual, const float* mean, int slices, double2* partial,
                                    unsigned* arrivals, Finish finish) {
  CG_SHARED(double, shared, [kThreads]);
  CG_SHARED(bool, last, [1]);
  const int64_t c = blockIdx.y;
  const Slice sl(s.n * hwv, slices, int(blockIdx.x));
  const float mu = mean[c];
  double sg = 0, sgx = 0;
  ChannelCursor at(sl.begin + threadIdx.x, hwv);
  for (int64_t j = sl.begin + threadIdx.x; j < sl.end; j += blockDim.x, at.advance(hwv)) {
    const int64_t i = at.element(c, s.c, hwv, V);
    float g[V], v[V];
    load_grad<V>(dy, relu_y, d_residual, i, g);
    load<V>(x + i, v);
    float vg = 0, vgx = 0;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      vg += g[k];
      vgx = fmaf(g[k], v[k] - mu, vgx);
    }
    sg += vg;
    sgx += vgx;
  }
  sg = block_sum(sg, shared);
  sgx = block_sum(sgx, shared);
  finish_channel_if_last(c, slices, make_double2(sg, sgx), partial, arrivals, last, finish);
}

// dbeta = sum g, dgamma = sum g * xhat, and the coefficients of dx = a g + b (x - mean) + d:
// training (statistics depend on x): with k = gamma invstd, dx = k (g - mean(g) - xhat mean(g xhat)),
// so a = k, b = -k invstd mean(g xhat), d = -k mean(g); eval (statistics constant): dx = k g.
// invstd is the saved one (training, var null) or 1/sqrt(running_var + eps) (eval).
struct GradFinish {
  BatchNormShape s;
  bool training;
  const float *gamma, *mean, *invstd, *var;
  float eps;
  float *dgamma, *dbeta;
  float4* coef;
  __device__ void operator()(int64_t c, double2 totals) const {
    const double sg = totals.x, sgx = totals.y;
    const float is = var ? 1.f / sqrtf(var[c] + eps) : invstd[c];
    const double sum_g_xhat = sgx * double(is), m = double(s.n * s.hw);
    dbeta[c] = float(sg);
    dgamma[c] = float(sum_g_xhat);
    const double k = double(gamma[c]) * double(is);
    coef[c] = training ? make_float4(float(k), float(-k * double(is) * sum_g_xhat / m), mean[c], float(-k * sg / m))
                       : make_float4(float(k), 0.f, mean[c], 0.f);
  }
};

template <typename T, int V>
__global__ void grad_input_kernel(BatchNormShape s, int hwv, const T* dy, const T* x, const T* relu_y,
                                  const float4* coef, T* dx) {
  const int64_t total = s.n * s.c * hwv, stride = int64_t(gridDim.x) * blockDim.x;
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= total) return;
  for (FlatCursor at(k, stride, hwv, int(s.c)); k < total; k += stride, at.advance()) {
    const float4 f = coef[at.c];
    float g[V], v[V];
    load_grad<V, T>(dy, relu_y, nullptr, k * V, g);
    load<V>(x + k * V, v);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = fmaf(f.x, g[e], fmaf(f.y, v[e] - f.z, f.w));
    store<V>(dx + k * V, v);
  }
}

// ---------------------------------------------------------------------------------------------
// SyncBatchNorm's per-channel phases (kernels/cpu/batch_norm.h has their semantics). moments:
// [sum x, sum x^2 per channel, count], float64; converted from the shifted partials in double.

// This replica's moments from the shifted totals.
template <typename T>
struct MomentsFinish {
  BatchNormShape s;
  const T* x;
  double* moments;
  __device__ void operator()(int64_t c, double2 totals) const {
    const double m = double(s.n * s.hw), a = double(stats_shift(s, x, c)), sum = totals.x, sq = totals.y;
    moments[c] = sum + m * a;                           // sum x = sum d + m a
    moments[s.c + c] = sq + 2.0 * a * sum + m * a * a;  // sum x^2 = sum d^2 + 2 a sum d + m a^2
    if (c == 0) moments[2 * s.c] = m;
  }
};

// StatsFinish's work from summed moments (moments[2C]: the count over all replicas).
__global__ void stats_from_moments_kernel(int64_t channels, const double* moments, const float* gamma,
                                          const float* beta, float eps, float momentum, float* running_mean,
                                          float* running_var, float* save_mean, float* save_invstd, float2* affine) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const double m = fmax(moments[2 * channels], 1.0);
  const double mean = moments[c] / m, var = fmax(moments[channels + c] / m - mean * mean, 0.0);
  finish_channel_stats(c, mean, var, m, gamma, beta, eps, momentum, running_mean, running_var, save_mean, save_invstd,
                       affine);
}

// This replica's dbeta, dgamma and sums = (sum g, sum g * xhat) per channel.
struct GradSumsFinish {
  int64_t channels;
  const float* invstd;
  float *dgamma, *dbeta;
  double* sums;
  __device__ void operator()(int64_t c, double2 totals) const {
    const double sg = totals.x, sum_g_xhat = totals.y * double(invstd[c]);
    dbeta[c] = float(sg);
    dgamma[c] = float(sum_g_xhat);
    sums[c] = sg;
    sums[channels + c] = sum_g_xhat;
  }
};

// GradFinish's training coefficients from summed sums and the global count.
__global__ void grad_coef_from_sums_kernel(int64_t channels, const double* sums, const double* moments,
                                           const float* gamma, const float* mean, const float* invstd, float4* coef) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const double m = fmax(moments[2 * channels], 1.0), is = double(invstd[c]);
  const double k = double(gamma[c]) * is;
  coef[c] = make_float4(float(k), float(-k * is * sums[channels + c] / m), mean[c], float(-k * sums[c] / m));
}

// ---------------------------------------------------------------------------------------------
// Launchers.

// Channels-last: every H*W plane is one value, so the row kernels apply.
bool channels_last(const BatchNormShape& s) { return s.hw == 1; }

// The widest access (16, 8 or sizeof(T) bytes) whose vector divides the contiguous run of one
// channel's values (H*W for NCHW planes, C for channels-last rows, where a vector spans
// channels) and to which every pointer is aligned.
template <typename T>
int vector_bytes(const BatchNormShape& s, std::initializer_list<const void*> pointers) {
  const int64_t run = channels_last(s) ? s.c : s.hw;
  for (int bytes : {16, 8}) {
    bool ok = run % (bytes / int64_t(sizeof(T))) == 0;
    for (const void* p : pointers) ok = ok && reinterpret_cast<uintptr_t>(p) % bytes == 0;
    if (ok) return bytes;
  }
  return int(sizeof(T));
}

// Calls f(std::integral_constant<int, V>) for the vector length of `bytes`.
template <typename T, typename F>
void with_vector(int bytes, F&& f) {
  constexpr int kScalar = 1, kHalfWide = 8 / int(sizeof(T)), kWide = 16 / int(sizeof(T));
  if (bytes == 16) return f(std::integral_constant<int, kWide>{});
  if (bytes == 8) return f(std::integral_constant<int, kHalfWide>{});
  return f(std::integral_constant<int, kScalar>{});
}

// The current device's SM count (the grids below are a function of it), asked once per device
// index below kDevices and every time past it.
int sm_count() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices] = {};
  int device = 0;
  CG_CUDA_CHECK(cudaGetDevice(&device));
  if (device < kDevices)
    if (const int count = cached[device].load(std::memory_order_relaxed)) return count;
  int count = 0;
  CG_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  if (device < kDevices) cached[device].store(count, std::memory_order_relaxed);
  return count;
}

// How a reduction splits the work: a grid of blocks over (slices of a channel's values, channel
// groups). NCHW: a block per (slice, channel), about 8 blocks of 256 threads per SM on an H100 in
// all (one full wave), no slice shorter than one vector per thread. Channels-last
// (row_reduce_grid): a block per (group of `width` channel vectors, slice of rows).
struct PartialGrid {
  int slices, groups, width;
};

// Channels-last reductions run `per_sm` blocks of 256 threads per SM (bn::kStatsBlocksPerSm,
// bn::kGradBlocksPerSm): under an SM's 8, yet with four or more 16-byte loads in flight per
// thread (walk_rows) 48-64 KB are in flight per SM, about three times what Little's law asks at
// 2.9 TB/s and ~800 ns; fewer blocks than a full wave keep few the partials the last block adds.
// A block covers about 32 channels (128 bytes of an fp32 row), so a 64-channel layer has two
// groups whose last blocks finish side by side; every lane gets at least kRowsPerLane rows. The
// grid is a pure function of (shape, V, SM count), and the sums' order with it.
constexpr int kRowsPerLane = 4;

PartialGrid row_reduce_grid(const BatchNormShape& s, int V, int per_sm) {
  const int64_t columns = s.c / V;
  const int width = int(std::min<int64_t>(columns, std::max(1, 32 / V)));
  const int groups = int((columns + width - 1) / width);
  const int64_t lanes = kThreads / width, most = std::max<int64_t>(1, s.n / (lanes * kRowsPerLane));
  const int64_t want = (int64_t(sm_count()) * per_sm + groups - 1) / groups;
  return {int(std::max<int64_t>(1, std::min(want, most))), groups, width};
}

// The statistics' grid (per_sm: bn::kStatsBlocksPerSm) or the gradient's (bn::kGradBlocksPerSm).
PartialGrid partial_grid(const BatchNormShape& s, int V, int per_sm) {
  constexpr int64_t kWave = 8 * 132;
  if (channels_last(s)) return row_reduce_grid(s, V, per_sm);
  const int64_t hwv = s.hw / V, most = std::max<int64_t>(1, s.n * hwv / kThreads);
  const int64_t want = (kWave + s.c - 1) / s.c;
  return {int(std::max<int64_t>(1, std::min(want, most))), int(s.c), 0};
}

// Blocks of `Kernel` (kThreads each) one SM holds at once, as the device says (asked once per
// kernel: the devices of one process are taken to be one kind); the emulator has no such answer,
// and gets a full SM's 8.
template <auto Kernel>
int blocks_per_sm() {
#ifdef CUDAGRAD_GPU_EMULATION
  return 2048 / kThreads;
#else
  static std::atomic<int> cached{0};
  int blocks = cached.load(std::memory_order_relaxed);
  if (blocks == 0) {
    CG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, kThreads, 0));
    cached.store(std::max(blocks, 1), std::memory_order_relaxed);
  }
  return std::max(blocks, 1);
#endif
}

// The channels-last elementwise passes: a block is `width` channel vectors (all of them up to 256)
// times kThreads / width row lanes; one full wave (`per_sm` blocks an SM holds), but no more
// blocks than give every lane kRowsPerLane rows, so each thread has its four loads in flight. The
// results do not depend on the grid.
struct RowWalkGrid {
  dim3 blocks;
  int width;
};

RowWalkGrid row_walk_grid(const BatchNormShape& s, int V, int per_sm) {
  const int64_t columns = s.c / V;
  const int width = int(std::min<int64_t>(columns, kThreads));
  const int64_t groups = (columns + width - 1) / width, lanes = kThreads / width;
  const int64_t most = std::max<int64_t>(1, (s.n + lanes * kRowsPerLane - 1) / (lanes * kRowsPerLane));
  const int64_t want = (int64_t(sm_count()) * per_sm + groups - 1) / groups;
  return {dim3(unsigned(std::max<int64_t>(1, std::min(want, most))), unsigned(groups)), width};
}

int channel_blocks(const BatchNormShape& s) { return int((s.c + kThreads - 1) / kThreads); }

// One scratch allocation from the caller's workspace: the partials (double2 per slice and
// channel), per-channel coefficients (`coef_bytes` each), then the reductions' arrival counters
// (one per channel group, or per channel for NCHW; zeroed by the launcher), each part 16-byte
// aligned.
struct Scratch {
  PartialGrid grid;
  double2* partial;
  void* coef;
  unsigned* arrivals;
  Scratch(const BatchNormShape& s, const PartialGrid& g, size_t coef_bytes, const WorkspaceFn& workspace) : grid(g) {
    auto aligned = [](size_t bytes) { return (bytes + 15) / 16 * 16; };
    const size_t partial_bytes = size_t(s.c) * size_t(g.slices) * sizeof(double2);
    const size_t coef_total = aligned(size_t(s.c) * coef_bytes);
    char* base = static_cast<char*>(workspace(partial_bytes + coef_total + aligned(arrival_bytes())));
    partial = reinterpret_cast<double2*>(base);
    coef = base + partial_bytes;
    arrivals = reinterpret_cast<unsigned*>(base + partial_bytes + coef_total);
  }
  size_t arrival_bytes() const { return size_t(grid.groups) * sizeof(unsigned); }
};

bn::RowGrid row_grid_args(const BatchNormShape& s, const PartialGrid& g) { return {s.n, s.c, g.width, g.slices}; }

// The forward's reduction: per channel, the shifted (sum d, sum d^2) of x handed to `finish`, in
// one kernel whose last block of each channel group (NCHW: of each channel) finishes it. The
// arrival counters start at zero: the last block is the one that counts g.slices.
template <typename T, int V, typename Finish>
void reduce_stats(const BatchNormShape& s, const T* x, const Scratch& r, const Finish& finish, Stream st) {
  const PartialGrid& g = r.grid;
  zero_device(r.arrivals, r.arrival_bytes(), st);
  if (channels_last(s)) {
    launch_kernel(bn::stats_rows_kernel<T, V, Finish>, "batch_norm stats rows kernel", dim3(g.groups, g.slices),
                  kThreads, 0, as_cuda(st), row_grid_args(s, g), x, r.partial, r.arrivals, finish);
  } else {
    launch_kernel(stats_partial_kernel<T, V, Finish>, "batch_norm stats kernel", dim3(g.slices, g.groups), kThreads,
                  0, as_cuda(st), s, int(s.hw / V), x, g.slices, r.partial, r.arrivals, finish);
  }
}

// The backward's reduction: per channel (sum g, sum g (x - mean)) handed to `finish`, the masked
// gradient written to d_residual on the way; one kernel, as reduce_stats.
template <typename T, int V, typename Finish>
void reduce_grad(const BatchNormShape& s, const T* dy, const T* x, const T* relu_y, T* d_residual, const float* mean,
                 const Scratch& r, const Finish& finish, Stream st) {
  const PartialGrid& g = r.grid;
  zero_device(r.arrivals, r.arrival_bytes(), st);
  if (channels_last(s)) {
    launch_kernel(bn::grad_rows_kernel<T, V, Finish>, "batch_norm grad rows kernel", dim3(g.groups, g.slices),
                  kThreads, 0, as_cuda(st), row_grid_args(s, g), dy, x, relu_y, d_residual, mean, r.partial,
                  r.arrivals, finish);
  } else {
    launch_kernel(grad_partial_kernel<T, V, Finish>, "batch_norm grad kernel", dim3(g.slices, g.groups), kThreads, 0,
                  as_cuda(st), s, int(s.hw / V), dy, x, relu_y, d_residual, mean, g.slices, r.partial, r.arrivals,
                  finish);
  }
}

// The last step of the forward: y = finish(x * scale + shift).
template <typename T, int V>
void launch_affine(const BatchNormShape& s, const T* x, const float2* affine, const T* residual, T* y, bool relu,
                   Stream st) {
  if (channels_last(s)) {
    const RowWalkGrid g = row_walk_grid(s, V, blocks_per_sm<bn::affine_rows_kernel<T, V>>());
    launch_kernel(bn::affine_rows_kernel<T, V>, "batch_norm affine kernel", g.blocks, kThreads, 0, as_cuda(st), s.n,
                  s.c, g.width, x, affine, residual, y, relu);
    return;
  }
  const int blocks = blocks_for(s.n * s.c * s.hw / V);
  launch_kernel(affine_kernel<T, V>, "batch_norm affine kernel", blocks, kThreads, 0, as_cuda(st), s, int(s.hw / V),
                x, affine, residual, y, relu);
}

// The backward's last step: dx = a g + b (x - mean) + d. With a residual, the masked gradient is
// already in d_residual: read back instead of masking dy again.
template <typename T, int V>
void launch_grad_input(const BatchNormShape& s, const T* dy, const T* x, const T* relu_y, const T* d_residual,
                       const float4* coef, T* dx, Stream st) {
  const T* g = d_residual ? d_residual : dy;
  const T* mask = d_residual ? nullptr : relu_y;
  if (channels_last(s)) {
    const RowWalkGrid w = row_walk_grid(s, V, blocks_per_sm<bn::grad_input_rows_kernel<T, V>>());
    launch_kernel(bn::grad_input_rows_kernel<T, V>, "batch_norm grad input kernel", w.blocks, kThreads, 0,
                  as_cuda(st), s.n, s.c, w.width, g, x, mask, coef, dx);
    return;
  }
  const int blocks = blocks_for(s.n * s.c * s.hw / V);
  launch_kernel(grad_input_kernel<T, V>, "batch_norm grad input kernel", blocks, kThreads, 0, as_cuda(st), s,
                int(s.hw / V), g, x, mask, coef, dx);
}

template <typename T>
struct Forward {
  static void run(const BatchNormShape& s, bool training, const void* x_, const float* gamma, const float* beta,
                  float eps, float momentum, float* rm, float* rv, void* y_, float* sm, float* si, Activation act,
                  const void* residual_, const WorkspaceFn& workspace, Stream st) {
    if (s.n * s.c * s.hw == 0) return;
    const T *x = static_cast<const T*>(x_), *residual = static_cast<const T*>(residual_);
    T* y = static_cast<T*>(y_);
    const bool relu = act == Activation::relu;
    with_vector<T>(vector_bytes<T>(s, {x_, y_, residual_}), [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const PartialGrid grid = training ? partial_grid(s, V, bn::kStatsBlocksPerSm) : PartialGrid{0, 0, 0};
      const Scratch scratch(s, grid, sizeof(float2), workspace);
      auto* affine = static_cast<float2*>(scratch.coef);
      if (training) {
        const StatsFinish<T> finish{s, x, gamma, beta, eps, momentum, rm, rv, sm, si, affine};
        reduce_stats<T, V>(s, x, scratch, finish, st);
      } else {
        launch_kernel(eval_affine_kernel, "batch_norm eval_affine_kernel", channel_blocks(s), kThreads, 0, as_cuda(st),
                      s.c, gamma, beta, rm, rv, eps, affine);
      }
      launch_affine<T, V>(s, x, affine, residual, y, relu, st);
    });
  }
};

template <typename T>
struct Backward {
  static void run(const BatchNormShape& s, bool training, const void* dy_, const void* x_, const float* gamma,
                  const float* mean, const float* invstd, const float* var, float eps, void* dx_, float* dgamma,
                  float* dbeta, const void* relu_y_, void* d_residual_, const WorkspaceFn& workspace, Stream st) {
    if (s.n * s.c * s.hw == 0) return;
    const T *dy = static_cast<const T*>(dy_), *x = static_cast<const T*>(x_), *relu_y = static_cast<const T*>(relu_y_);
    T *dx = static_cast<T*>(dx_), *d_residual = static_cast<T*>(d_residual_);
    with_vector<T>(vector_bytes<T>(s, {dy_, x_, dx_, relu_y_, d_residual_}), [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const Scratch scratch(s, partial_grid(s, V, bn::kGradBlocksPerSm), sizeof(float4), workspace);
      auto* coef = static_cast<float4*>(scratch.coef);
      const GradFinish finish{s, training, gamma, mean, invstd, var, eps, dgamma, dbeta, coef};
      reduce_grad<T, V>(s, dy, x, relu_y, d_residual, mean, scratch, finish, st);
      launch_grad_input<T, V>(s, dy, x, relu_y, d_residual, coef, dx, st);
    });
  }
};

template <typename T>
struct LocalMoments {
  static void run(const BatchNormShape& s, const void* x_, double* moments, const WorkspaceFn& workspace, Stream st) {
    const T* x = static_cast<const T*>(x_);
    with_vector<T>(vector_bytes<T>(s, {x_}), [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const Scratch scratch(s, partial_grid(s, V, bn::kStatsBlocksPerSm), 0, workspace);
      reduce_stats<T, V>(s, x, scratch, MomentsFinish<T>{s, x, moments}, st);
    });
  }
};

template <typename T>
struct ForwardWithMoments {
  static void run(const BatchNormShape& s, const void* x_, const float* gamma, const float* beta, float eps,
                  float momentum, const double* moments, float* rm, float* rv, void* y_, float* sm, float* si,
                  Activation act, const void* residual_, const WorkspaceFn& workspace, Stream st) {
    const T *x = static_cast<const T*>(x_), *residual = static_cast<const T*>(residual_);
    T* y = static_cast<T*>(y_);
    with_vector<T>(vector_bytes<T>(s, {x_, y_, residual_}), [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const Scratch scratch(s, PartialGrid{0, 0, 0}, sizeof(float2), workspace);
      auto* affine = static_cast<float2*>(scratch.coef);
      launch_kernel(stats_from_moments_kernel, "batch_norm stats_from_moments_kernel", channel_blocks(s), kThreads, 0,
                    as_cuda(st), s.c, moments, gamma, beta, eps, momentum, rm, rv, sm, si, affine);
      launch_affine<T, V>(s, x, affine, residual, y, act == Activation::relu, st);
    });
  }
};

template <typename T>
struct LocalGradSums {
  static void run(const BatchNormShape& s, const void* dy_, const void* x_, const float* mean, const float* invstd,
                  float* dgamma, float* dbeta, double* sums, const void* relu_y_, void* d_residual_,
                  const WorkspaceFn& workspace, Stream st) {
    const T *dy = static_cast<const T*>(dy_), *x = static_cast<const T*>(x_), *relu_y = static_cast<const T*>(relu_y_);
    T* d_residual = static_cast<T*>(d_residual_);
    with_vector<T>(vector_bytes<T>(s, {dy_, x_, relu_y_, d_residual_}), [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const Scratch scratch(s, partial_grid(s, V, bn::kGradBlocksPerSm), 0, workspace);
      const GradSumsFinish finish{s.c, invstd, dgamma, dbeta, sums};
      reduce_grad<T, V>(s, dy, x, relu_y, d_residual, mean, scratch, finish, st);
    });
  }
};

template <typename T>
struct BackwardWithSums {
  static void run(const BatchNormShape& s, const void* dy_, const void* x_, const float* gamma, const float* mean,
                  const float* invstd, const double* sums, const double* moments, void* dx_, const void* relu_y_,
                  const void* d_residual_, const WorkspaceFn& workspace, Stream st) {
    const T *dy = static_cast<const T*>(dy_), *x = static_cast<const T*>(x_), *relu_y = static_cast<const T*>(relu_y_);
    const T* d_residual = static_cast<const T*>(d_residual_);
    T* dx = static_cast<T*>(dx_);
    with_vector<T>(vector_bytes<T>(s, {dy_, x_, dx_, relu_y_, d_residual_}), [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const Scratch scratch(s, PartialGrid{0, 0, 0}, sizeof(float4), workspace);
      auto* coef = static_cast<float4*>(scratch.coef);
      launch_kernel(grad_coef_from_sums_kernel, "batch_norm grad_coef_from_sums_kernel", channel_blocks(s), kThreads, 0,
                    as_cuda(st), s.c, sums, moments, gamma, mean, invstd, coef);
      launch_grad_input<T, V>(s, dy, x, relu_y, d_residual, coef, dx, st);
    });
  }
};

}  // namespace

void batch_norm_local_moments(const BatchNormShape& s, DType dtype, const void* x, double* moments,
                             const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<LocalMoments>("batch_norm_local_moments", dtype, s, x, moments, workspace, stream);
}

void batch_norm_forward_with_moments(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                                    const float* beta, float eps, float momentum, const double* moments,
                                    float* running_mean, float* running_var, void* y, float* save_mean,
                                    float* save_invstd, Activation act, const void* residual,
                                    const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<ForwardWithMoments>("batch_norm_forward_with_moments", dtype, s, x, gamma, beta, eps, momentum,
                                        moments, running_mean, running_var, y, save_mean, save_invstd, act, residual,
                                        workspace, stream);
}

void batch_norm_local_grad_sums(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                               const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta,
                               double* sums, const void* relu_y, void* d_residual, const WorkspaceFn& workspace,
                               Stream stream) {
  dispatch_floating<LocalGradSums>("batch_norm_local_grad_sums", dtype, s, dy, x, save_mean, save_invstd, dgamma,
                                   dbeta, sums, relu_y, d_residual, workspace, stream);
}

void batch_norm_backward_with_sums(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                                  const float* gamma, const float* save_mean, const float* save_invstd,
                                  const double* sums, const double* moments, void* dx, const void* relu_y,
                                  const void* d_residual, const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<BackwardWithSums>("batch_norm_backward_with_sums", dtype, s, dy, x, gamma, save_mean, save_invstd,
                                      sums, moments, dx, relu_y, d_residual, workspace, stream);
}

void batch_norm_forward_train(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                             const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                             void* y, float* save_mean, float* save_invstd, Activation act, const void* residual,
                             const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<Forward>("batch_norm_forward_train", dtype, s, true, x, gamma, beta, eps, momentum, running_mean,
                             running_var, y, save_mean, save_invstd, act, residual, workspace, stream);
}

void batch_norm_forward_eval(const BatchNormShape& s, DType dtype, const void* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps, void* y, Activation act,
                            const void* residual, const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<Forward>("batch_norm_forward_eval", dtype, s, false, x, gamma, beta, eps, 0.f,
                             const_cast<float*>(running_mean), const_cast<float*>(running_var), y,
                             static_cast<float*>(nullptr), static_cast<float*>(nullptr), act, residual, workspace,
                             stream);
}

void batch_norm_backward_train(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                              const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                              float* dgamma, float* dbeta, const void* relu_y, void* d_residual,
                              const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<Backward>("batch_norm_backward_train", dtype, s, true, dy, x, gamma, save_mean, save_invstd,
                              static_cast<const float*>(nullptr), 0.f, dx, dgamma, dbeta, relu_y, d_residual, workspace,
                              stream);
}

void batch_norm_backward_eval(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                             const float* gamma, const float* running_mean, const float* running_var, float eps,
                             void* dx, float* dgamma, float* dbeta, const void* relu_y, void* d_residual,
                             const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<Backward>("batch_norm_backward_eval", dtype, s, false, dy, x, gamma, running_mean,
                              static_cast<const float*>(nullptr), running_var, eps, dx, dgamma, dbeta, relu_y,
                              d_residual, workspace, stream);
}

}  // namespace cg::kernels::cuda
