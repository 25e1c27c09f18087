// Pieces the batch-norm kernels for both memory orders share (kernels/cuda/batch_norm.cu for
// NCHW planes, batch_norm_rows.cuh for channels-last rows): vector access to V consecutive
// elements, the gradient that reaches the normalization, and the slice of a channel's values one
// block of a partial-sum kernel covers.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cuda/dtype.cuh"

namespace cg::kernels::cuda::bn {

template <int Bytes> struct RawBits;
template <> struct RawBits<16> { using type = uint4; };
template <> struct RawBits<8> { using type = uint2; };
template <> struct RawBits<4> { using type = unsigned; };
template <> struct RawBits<2> { using type = unsigned short; };

// V consecutive values of T as fp32, in one load of V * sizeof(T) bytes (the launchers only pick
// V when every pointer is aligned to that many bytes).
// As stored, unconverted: a row walk keeps four rows of these in flight, and as T they take a
// half (f16, bf16) of the registers fp32 would.
template <int V, typename T>
__device__ __forceinline__ void load_raw(const T* p, T (&out)[V]) {
  using Raw = typename RawBits<V * int(sizeof(T))>::type;
  const Raw raw = *reinterpret_cast<const Raw*>(p);
  memcpy(out, &raw, sizeof raw);
}

template <int V, typename T>
__device__ __forceinline__ void load(const T* p, float (&out)[V]) {
  T v[V];
  load_raw<V>(p, v);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_f32(v[k]);
}

template <int V, typename T>
__device__ __forceinline__ void store(T* p, const float (&in)[V]) {
  using Raw = typename RawBits<V * int(sizeof(T))>::type;
  T v[V];
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = from_f32<T>(in[k]);
  Raw raw;
  memcpy(&raw, v, sizeof raw);
  *reinterpret_cast<Raw*>(p) = raw;
}

// The gradient reaching the normalization through a fused ReLU: g where its output y was > 0, else 0.
__device__ __forceinline__ float relu_masked(float g, float y) { return y > 0.f ? g : 0.f; }

// The gradient reaching the normalization: dy, masked by relu_y when there is one (relu_masked).
// When the forward added a residual, that gradient is also the residual's: it is written to
// d_residual (if not null) so the elementwise pass can read it back instead of dy and relu_y.
template <int V, typename T>
__device__ __forceinline__ void load_grad(const T* dy, const T* relu_y, T* d_residual, int64_t at, float (&g)[V]) {
  load<V>(dy + at, g);
  if (relu_y) {
    float y[V];
    load<V>(relu_y + at, y);
#pragma unroll
    for (int k = 0; k < V; ++k) g[k] = relu_masked(g[k], y[k]);
  }
  if (d_residual) store<V>(d_residual + at, g);
}

// The normalized value, then (as separate batch_norm and add_relu kernels would) rounded to T,
// added to the residual and passed through the activation: fusing changes no bit.
template <typename T>
__device__ __forceinline__ float finish_output(float normalized, const float* residual, int k, bool relu) {
  float v = normalized;
  if (residual) v = to_f32(from_f32<T>(v)) + residual[k];
  return relu ? fmaxf(v, 0.f) : v;
}

// A channel's (sum .x, sum .y) over its partials p[0 .. slices), by one warp: lane l adds
// z = l, l + 32, ... in order (coalesced: neighbouring lanes read neighbouring slices), then a
// fixed butterfly. The order never depends on timing, and since each butterfly step adds the same
// two values on both lanes, every lane returns the same bits. One thread per channel walking its
// slices was the old way: channels-last runs about a thousand slices (one wave of blocks over few
// channel groups), and that serial loop took most of the batch norm's time on the H100.
__device__ __forceinline__ double2 warp_sum_slices(const double2* p, int slices) {
  const int lane = int(threadIdx.x) & 31;
  double2 t = make_double2(0, 0);
  for (int z = lane; z < slices; z += 32) {
    const double2 v = __ldcg(p + z);  // from L2: other blocks of this grid may have written it
    t.x += v.x;
    t.y += v.y;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    t.x += __shfl_xor_sync(0xffffffffu, t.x, offset);
    t.y += __shfl_xor_sync(0xffffffffu, t.y, offset);
  }
  return t;
}

// The items [begin, end) of `count` that slice `slice` of `slices` covers (NCHW: a channel's
// vectors, slice blockIdx.x; channels-last: the rows, slice blockIdx.y).
struct Slice {
  int64_t begin, end;
  __device__ Slice(int64_t count, int slices, int slice) {
    const int64_t per = (count + slices - 1) / slices;
    begin = min(count, int64_t(slice) * per);
    end = min(count, begin + per);
  }
};

// Whether this block is the last of `blocks` to arrive at `counter` (zeroed before the launch).
// Every thread fences its own writes before the count, so the last block sees all blocks'
// partials; `flag` is one shared bool. Called by every thread of the block.
__device__ __forceinline__ bool last_to_arrive(unsigned* counter, int blocks, bool* flag) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) flag[0] = atomicAdd(counter, 1u) == unsigned(blocks - 1);
  __syncthreads();
  const bool last = flag[0];
  if (last) __threadfence();  // the others' partials are read after the count
  return last;
}

// Row r, r + stride, ... below end, `Unroll` at a time: the loads of all `Unroll` rows issue
// before any of them is used (independent 16-byte loads in flight per thread is what reaches
// bandwidth), then use() takes them in row order, so sums come out in the same order as a plain
// loop's. load(row, item) fills an Item; use(row, item) consumes it.
template <int Unroll, typename Item, typename Load, typename Use>
__device__ __forceinline__ void walk_rows(int64_t row, int64_t end, int64_t stride, Load&& load, Use&& use) {
  for (; row + (Unroll - 1) * stride < end; row += Unroll * stride) {
    Item items[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) load(row + u * stride, items[u]);
#pragma unroll
    for (int u = 0; u < Unroll; ++u) use(row + u * stride, items[u]);
  }
  for (; row < end; row += stride) {
    Item item;
    load(row, item);
    use(row, item);
  }
}

}  // namespace cg::kernels::cuda::bn
