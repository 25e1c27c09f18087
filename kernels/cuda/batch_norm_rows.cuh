// Channels-last batch norm: the shape {rows, C, 1}, each row holding C contiguous channels
// ([N, H, W, C] activations, rows = N * H * W). Threads side by side read consecutive channels,
// so every load is coalesced; a thread owns V consecutive channels (one 16- or 8-byte vector, V
// dividing C), keeps that vector's per-channel values in registers and walks rows, four rows'
// loads in flight at a time (walk_rows).
//
// The two reductions (statistics forward, gradient sums backward) are one kernel each: every
// block sums its slice of rows for its group of channels and writes partial[c][slice]; the last
// block of a group to arrive (last_to_arrive) adds the group's slices in slice order and hands
// each channel's totals to `Finish` (the statistics, the gradient coefficients, or SyncBatchNorm's
// moments: kernels/cuda/batch_norm.cu). The sums' order depends on the grid, and the grid is a pure
// function of the shape, the vector width and the SM count (row_reduce_grid in batch_norm.cu), so
// results are bit-identical run to run on one kind of device.
#pragma once
#include "kernels/cuda/batch_norm_parts.cuh"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda::bn {

// The reductions run this many blocks of kThreads per SM (row_reduce_grid in batch_norm.cu says
// why); __launch_bounds__ holds their registers to what that many blocks need. The gradient's
// holds more per thread (three tensors' rows, two sums and the mean per channel): at 4 blocks,
// 64 registers, fp16 with V = 8 spilled; at 3, 85 registers, none does.
constexpr int kStatsBlocksPerSm = 4, kGradBlocksPerSm = 3;
// Rows a thread loads before using any: four 16-byte loads in flight for the statistics (one
// tensor); two rows of the gradient's two or three tensors, four to six loads, in the registers
// the statistics' four rows would take (four rows of three spill at V = 8).
constexpr int kStatsRowsInFlight = 4, kGradRowsInFlight = 2;

// A block of a row kernel: `width` channel vectors side by side times kThreads / width row lanes
// (threads past lanes * width idle). `group` picks the block's `width` channel vectors.
struct RowLanes {
  int column, lane, lanes;  // this thread's vector in the group, its row lane, lanes in all
  int64_t first_channel;    // of this thread's vector
  bool active;
  __device__ RowLanes(int64_t channels, int width, int V, int64_t group) {
    column = int(threadIdx.x) % width;
    lane = int(threadIdx.x) / width;
    lanes = kThreads / width;
    first_channel = (group * width + column) * V;
    active = lane < lanes && first_channel < channels;
  }
};

// A reduction's grid: blockIdx.x the group of `width` channel vectors, blockIdx.y the slice of
// rows (groups run side by side, so blocks resident together read the same rows).
struct RowGrid {
  int64_t rows, channels;
  int width, slices;
};

// The block's (a, b) per channel, added over its row lanes in double by a fixed tree, written to
// partial[c][blockIdx.y]. `shared` holds kThreads * V pairs; idle threads add zeros.
template <int V>
__device__ void write_block_partials(const RowLanes& at, const RowGrid& g, const float (&a)[V], const float (&b)[V],
                                     double2* shared, double2* partial) {
#pragma unroll
  for (int k = 0; k < V; ++k) shared[threadIdx.x * V + k] = make_double2(a[k], b[k]);
  __syncthreads();
  int top = 1;
  while (top < at.lanes) top *= 2;
  for (int step = top / 2; step > 0; step /= 2) {
    if (at.lane < step && at.lane + step < at.lanes) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        double2& mine = shared[threadIdx.x * V + k];
        const double2 other = shared[(threadIdx.x + step * g.width) * V + k];
        mine = make_double2(mine.x + other.x, mine.y + other.y);
      }
    }
    __syncthreads();
  }
  if (at.lane != 0 || !at.active) return;
#pragma unroll
  for (int k = 0; k < V; ++k) partial[(at.first_channel + k) * g.slices + blockIdx.y] = shared[threadIdx.x * V + k];
}

// The last block of group blockIdx.x: a warp per channel adds its slices in order
// (warp_sum_slices) and lane 0 hands the totals to finish(c, totals).
template <int V, typename Finish>
__device__ void finish_group(const RowGrid& g, const double2* partial, const Finish& finish) {
  const int64_t first = int64_t(blockIdx.x) * g.width * V, count = min(int64_t(g.width) * V, g.channels - first);
  const int warps = int(blockDim.x) / 32;
  for (int64_t i = threadIdx.x / 32; i < count; i += warps) {
    const double2 totals = warp_sum_slices(partial + (first + i) * g.slices, g.slices);
    if (threadIdx.x % 32 == 0) finish(first + i, totals);
  }
}

// The end both reductions share: the block's partials, then the group's finish if last to arrive.
template <int V, typename Finish>
__device__ void reduce_rows_end(const RowLanes& at, const RowGrid& g, const float (&a)[V], const float (&b)[V],
                                double2* shared, bool* last, double2* partial, unsigned* arrivals,
                                const Finish& finish) {
  write_block_partials<V>(at, g, a, b, shared, partial);
  if (last_to_arrive(arrivals + blockIdx.x, g.slices, last)) finish_group<V>(g, partial, finish);
}

template <typename T, int V>
struct RowVector {
  T v[V];
};

// Per channel (sum d, sum d^2), d = x - x[row 0][c], then finish(c, totals) once per channel.
template <typename T, int V, typename Finish>
__global__ void __launch_bounds__(kThreads, kStatsBlocksPerSm)
    stats_rows_kernel(RowGrid g, const T* x, double2* partial, unsigned* arrivals, Finish finish) {
  CG_SHARED(double2, shared, [kThreads * V]);
  CG_SHARED(bool, last, [1]);
  const RowLanes at(g.channels, g.width, V, blockIdx.x);
  float sum[V] = {}, sq[V] = {};
  if (at.active) {
    float shift[V];
    load<V>(x + at.first_channel, shift);
    const Slice sl(g.rows, g.slices, int(blockIdx.y));
    walk_rows<kStatsRowsInFlight, RowVector<T, V>>(
        sl.begin + at.lane, sl.end, at.lanes,
        [&](int64_t r, RowVector<T, V>& item) { load_raw<V>(x + r * g.channels + at.first_channel, item.v); },
        [&](int64_t, const RowVector<T, V>& item) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float d = to_f32(item.v[k]) - shift[k];
            sum[k] += d;
            sq[k] = fmaf(d, d, sq[k]);
          }
        });
  }
  reduce_rows_end<V>(at, g, sum, sq, shared, last, partial, arrivals, finish);
}

// One row's dy (or the masked gradient), x and relu_y, as stored.
template <typename T, int V>
struct GradRow {
  T g[V], v[V], y[V];
};

template <int V, typename T>
__device__ __forceinline__ void load_grad_row(const T* dy, const T* x, const T* relu_y, int64_t at,
                                              GradRow<T, V>& row) {
  load_raw<V>(dy + at, row.g);
  if (relu_y) load_raw<V>(relu_y + at, row.y);
  load_raw<V>(x + at, row.v);
}

// The gradient reaching the normalization: dy, zeroed where a fused ReLU's output was not > 0.
template <typename T, int V>
__device__ __forceinline__ float masked_grad(const GradRow<T, V>& row, int k, bool relu) {
  return relu ? relu_masked(to_f32(row.g[k]), to_f32(row.y[k])) : to_f32(row.g[k]);
}

// Per channel (sum g, sum g * (x - mean[c])), then finish(c, totals) once per channel; g is
// also written to d_residual when there is one (see load_grad).
template <typename T, int V, typename Finish>
__global__ void __launch_bounds__(kThreads, kGradBlocksPerSm)
    grad_rows_kernel(RowGrid g, const T* dy, const T* x, const T* relu_y, T* d_residual, const float* mean,
                                 double2* partial, unsigned* arrivals, Finish finish) {
  CG_SHARED(double2, shared, [kThreads * V]);
  CG_SHARED(bool, last, [1]);
  const RowLanes at(g.channels, g.width, V, blockIdx.x);
  float sg[V] = {}, sgx[V] = {};
  if (at.active) {
    float mu[V];
#pragma unroll
    for (int k = 0; k < V; ++k) mu[k] = mean[at.first_channel + k];
    const Slice sl(g.rows, g.slices, int(blockIdx.y));
    walk_rows<kGradRowsInFlight, GradRow<T, V>>(
        sl.begin + at.lane, sl.end, at.lanes,
        [&](int64_t r, GradRow<T, V>& item) {
          load_grad_row<V>(dy, x, relu_y, r * g.channels + at.first_channel, item);
        },
        [&](int64_t r, const GradRow<T, V>& item) {
          float grad[V];
#pragma unroll
          for (int k = 0; k < V; ++k) {
            grad[k] = masked_grad(item, k, relu_y != nullptr);
            sg[k] += grad[k];
            sgx[k] = fmaf(grad[k], to_f32(item.v[k]) - mu[k], sgx[k]);
          }
          if (d_residual) store<V>(d_residual + r * g.channels + at.first_channel, grad);
        });
  }
  reduce_rows_end<V>(at, g, sg, sgx, shared, last, partial, arrivals, finish);
}

template <typename T, int V>
struct AffineRow {
  T v[V], r[V];
};

// y = finish(x * scale[c] + shift[c]): a thread keeps its vector's coefficients in registers and
// walks rows blockIdx.x * lanes + lane, stepping gridDim.x * lanes; blockIdx.y picks the group.
template <typename T, int V>
__global__ void affine_rows_kernel(int64_t rows, int64_t channels, int width, const T* x, const float2* affine,
                                   const T* residual, T* y, bool relu) {
  const RowLanes at(channels, width, V, blockIdx.y);
  if (!at.active) return;
  float2 a[V];
#pragma unroll
  for (int k = 0; k < V; ++k) a[k] = affine[at.first_channel + k];
  walk_rows<kStatsRowsInFlight, AffineRow<T, V>>(
      int64_t(blockIdx.x) * at.lanes + at.lane, rows, int64_t(gridDim.x) * at.lanes,
      [&](int64_t r, AffineRow<T, V>& item) {
        load_raw<V>(x + r * channels + at.first_channel, item.v);
        if (residual) load_raw<V>(residual + r * channels + at.first_channel, item.r);
      },
      [&](int64_t r, const AffineRow<T, V>& item) {
        float out[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float added = residual ? to_f32(item.r[k]) : 0.f;
          out[k] = finish_output<T>(fmaf(to_f32(item.v[k]), a[k].x, a[k].y), residual ? &added : nullptr, 0, relu);
        }
        store<V>(y + r * channels + at.first_channel, out);
      });
}

// dx = a g + b (x - mean) + d with the per-channel coefficients (a, b, mean, d) of the gradient
// finish, held in registers; rows walked as affine_rows_kernel does.
template <typename T, int V>
__global__ void grad_input_rows_kernel(int64_t rows, int64_t channels, int width, const T* dy, const T* x,
                                       const T* relu_y, const float4* coef, T* dx) {
  const RowLanes at(channels, width, V, blockIdx.y);
  if (!at.active) return;
  float4 f[V];
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = coef[at.first_channel + k];
  walk_rows<kGradRowsInFlight, GradRow<T, V>>(
      int64_t(blockIdx.x) * at.lanes + at.lane, rows, int64_t(gridDim.x) * at.lanes,
      [&](int64_t r, GradRow<T, V>& item) { load_grad_row<V>(dy, x, relu_y, r * channels + at.first_channel, item); },
      [&](int64_t r, const GradRow<T, V>& item) {
        float out[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float g = masked_grad(item, k, relu_y != nullptr);
          out[k] = fmaf(f[k].x, g, fmaf(f[k].y, to_f32(item.v[k]) - f[k].z, f[k].w));
        }
        store<V>(dx + r * channels + at.first_channel, out);
      });
}

}  // namespace cg::kernels::cuda::bn
