// Channels-last batch norm: the shape {rows, C, 1}, each row holding C contiguous channels
// ([N, H, W, C] activations, rows = N * H * W). Threads side by side read consecutive channels,
// so every load is coalesced; a thread owns V consecutive channels (one 16- or 8-byte vector, V
// dividing C) and walks rows. The per-channel finalize kernels are the NCHW ones
// (kernels/cuda/batch_norm.cu): they read the same partial[c][slice] layout written here.
#pragma once
#include "kernels/cuda/batch_norm_parts.cuh"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda::bn {

// A partial-sum block is `width` channel vectors side by side times kThreads / width row lanes;
// blockIdx.y picks the group of `width` channel vectors, blockIdx.x the slice of rows.
struct RowLanes {
  int column, lane, lanes;  // this thread's vector in the group, its row lane, lanes in all
  int64_t first_channel;    // of this thread's vector
  bool active;
  __device__ RowLanes(int64_t channels, int width, int V) {
    column = int(threadIdx.x) % width;
    lane = int(threadIdx.x) / width;
    lanes = kThreads / width;
    first_channel = (int64_t(blockIdx.y) * width + column) * V;
    active = lane < lanes && first_channel < channels;
  }
};

// Adds the lanes' per-thread pairs of each channel in lane order (deterministic) and writes the
// block's partial[c][blockIdx.x]. `shared` holds kThreads * V pairs.
template <int V>
__device__ void store_row_partials(const RowLanes& at, int width, int64_t channels, int slices, const double (&a)[V],
                                   const double (&b)[V], double2* shared, double2* partial) {
#pragma unroll
  for (int k = 0; k < V; ++k) shared[threadIdx.x * V + k] = make_double2(a[k], b[k]);
  __syncthreads();
  if (at.lane != 0 || at.first_channel >= channels) return;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    double2 total = make_double2(0, 0);
    for (int l = 0; l < at.lanes; ++l) {
      const double2 p = shared[(l * width + at.column) * V + k];
      total.x += p.x;
      total.y += p.y;
    }
    partial[(at.first_channel + k) * slices + blockIdx.x] = total;
  }
}

// partial[c][z] = (sum d, sum d^2), d = x - x[row 0][c], over slice z of the rows.
template <typename T, int V>
__global__ void stats_rows_partial_kernel(int64_t rows, int64_t channels, int width, const T* x, int slices,
                                          double2* partial) {
  CG_SHARED(double2, shared, [kThreads * V]);
  const RowLanes at(channels, width, V);
  double sum[V] = {}, sq[V] = {};
  if (at.active) {
    float shift[V];
    load<V>(x + at.first_channel, shift);
    const Slice sl(rows, slices);
    for (int64_t r = sl.begin + at.lane; r < sl.end; r += at.lanes) {
      float v[V];
      load<V>(x + r * channels + at.first_channel, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = v[k] - shift[k];
        sum[k] += d;
        sq[k] += d * d;
      }
    }
  }
  store_row_partials<V>(at, width, channels, slices, sum, sq, shared, partial);
}

// partial[c][z] = (sum g, sum g * (x - mean[c])) over slice z of the rows; g is also written to
// d_residual when there is one (see load_grad).
template <typename T, int V>
__global__ void grad_rows_partial_kernel(int64_t rows, int64_t channels, int width, const T* dy, const T* x,
                                         const T* relu_y, T* d_residual, const float* mean, int slices,
                                         double2* partial) {
  CG_SHARED(double2, shared, [kThreads * V]);
  const RowLanes at(channels, width, V);
  double sg[V] = {}, sgx[V] = {};
  if (at.active) {
    float mu[V];
#pragma unroll
    for (int k = 0; k < V; ++k) mu[k] = mean[at.first_channel + k];
    const Slice sl(rows, slices);
    for (int64_t r = sl.begin + at.lane; r < sl.end; r += at.lanes) {
      const int64_t i = r * channels + at.first_channel;
      float g[V], v[V];
      load_grad<V>(dy, relu_y, d_residual, i, g);
      load<V>(x + i, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        sg[k] += g[k];
        sgx[k] += g[k] * (v[k] - mu[k]);
      }
    }
  }
  store_row_partials<V>(at, width, channels, slices, sg, sgx, shared, partial);
}

// The channel vector of flat vector k, carried along a grid-stride loop without a division.
struct RowCursor {
  int64_t column, step, columns;
  __device__ RowCursor(int64_t k, int64_t stride, int64_t columns_)
      : column(k % columns_), step(stride % columns_), columns(columns_) {}
  __device__ void advance() {
    column += step;
    if (column >= columns) column -= columns;
  }
};

// y = finish(x * scale[c] + shift[c]), one vector per thread and grid-stride step.
template <typename T, int V>
__global__ void affine_rows_kernel(int64_t rows, int64_t channels, const T* x, const float2* affine,
                                   const T* residual, T* y, bool relu) {
  const int64_t columns = channels / V, total = rows * columns, stride = int64_t(gridDim.x) * blockDim.x;
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= total) return;
  for (RowCursor at(k, stride, columns); k < total; k += stride, at.advance()) {
    float v[V], r[V];
    load<V>(x + k * V, v);
    if (residual) load<V>(residual + k * V, r);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float2 a = affine[at.column * V + e];
      v[e] = finish_output<T>(fmaf(v[e], a.x, a.y), residual ? r : nullptr, e, relu);
    }
    store<V>(y + k * V, v);
  }
}

// dx = a g + b (x - mean) + d with the per-channel coefficients of grad_finalize_kernel.
template <typename T, int V>
__global__ void grad_input_rows_kernel(int64_t rows, int64_t channels, const T* dy, const T* x, const T* relu_y,
                                       const float4* coef, T* dx) {
  const int64_t columns = channels / V, total = rows * columns, stride = int64_t(gridDim.x) * blockDim.x;
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= total) return;
  for (RowCursor at(k, stride, columns); k < total; k += stride, at.advance()) {
    float g[V], v[V];
    load_grad<V, T>(dy, relu_y, nullptr, k * V, g);
    load<V>(x + k * V, v);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float4 f = coef[at.column * V + e];
      v[e] = fmaf(f.x, g[e], fmaf(f.y, v[e] - f.z, f.w));
    }
    store<V>(dx + k * V, v);
  }
}

}  // namespace cg::kernels::cuda::bn
