// The hand-written convolution: all three directions are one tiled implicit GEMM, each with its
// own gather (the im2col matrix is never built; a tile reads its window of the input straight
// from NCHW memory, zero outside the image), 64x64 output tiles through shared memory and fp32
// accumulation for every dtype. float32 runs on CUDA cores (4x4 outputs per thread); float16 and
// bfloat16 on tensor cores (WMMA 16x16x16 fragments, four warps of 32x32 each).
// Backward-filter reduces over N*OH*OW, which is long: it splits K into a fixed number of slices
// written to scratch and summed in slice order by a second kernel, so it is deterministic.
// The gathers are per element (NCHW): a correctness-first design; NHWC with vector loads is the
// planned speed-up (bench/NOTES.md).
#include "kernels/cuda/conv_native.h"
#include <mma.h>

#include "kernels/cuda/dtype.cuh"

namespace cg::kernels::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16;

struct Dims {  // the convolution's sizes, as device-friendly ints
  int n, ci, h, w, co, kh, kw, stride, pad, oh, ow;
};
Dims dims_of(const Conv2dShape& s) {
  return {int(s.n), int(s.c_in), int(s.h), int(s.w), int(s.c_out), int(s.kh), int(s.kw), int(s.stride), int(s.pad),
          int(s.out_h()), int(s.out_w())};
}

// x at the input pixel that output position m = (n, oy, ox) sees through tap k = (c, ky, kx);
// zero in the padding.
template <typename T>
__device__ __forceinline__ float window(const Dims& d, const T* x, int64_t m, int64_t k) {
  const int ox = int(m % d.ow), oy = int(m / d.ow % d.oh), n = int(m / (int64_t(d.ow) * d.oh));
  const int kx = int(k % d.kw), ky = int(k / d.kw % d.kh), c = int(k / (d.kw * d.kh));
  const int iy = oy * d.stride - d.pad + ky, ix = ox * d.stride - d.pad + kx;
  if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) return 0.f;
  return to_f32(x[((int64_t(n) * d.ci + c) * d.h + iy) * d.w + ix]);
}

// forward: A[m][k] = x window, m = (n, oy, ox), k = (ci, ky, kx); B[k][c] = w[c][k]; C = y.
template <typename T>
struct Forward {
  Dims d;
  const T *x, *w;
  __device__ int64_t rows() const { return int64_t(d.n) * d.oh * d.ow; }
  __device__ int64_t cols() const { return d.co; }
  __device__ int64_t depth() const { return int64_t(d.ci) * d.kh * d.kw; }
  __device__ float a(int64_t m, int64_t k) const { return window(d, x, m, k); }
  __device__ float b(int64_t k, int64_t c) const { return to_f32(w[c * depth() + k]); }
  __device__ int64_t out_index(int64_t m, int64_t c) const {  // y[n, c, oy, ox]
    const int64_t plane = int64_t(d.oh) * d.ow, n = m / plane;
    return (n * d.co + c) * plane + m % plane;
  }
};

// backward-data: A[m][k] = dy at the output that input pixel m saw through tap k (0 when none),
// m = (n, iy, ix), k = (co, ky, kx); B[k][c] = w[co][c][ky][kx]; C = dx.
template <typename T>
struct BackwardData {
  Dims d;
  const T *dy, *w;
  __device__ int64_t rows() const { return int64_t(d.n) * d.h * d.w; }
  __device__ int64_t cols() const { return d.ci; }
  __device__ int64_t depth() const { return int64_t(d.co) * d.kh * d.kw; }
  __device__ float a(int64_t m, int64_t k) const {
    const int ix = int(m % d.w), iy = int(m / d.w % d.h), n = int(m / (int64_t(d.w) * d.h));
    const int kx = int(k % d.kw), ky = int(k / d.kw % d.kh), o = int(k / (d.kw * d.kh));
    const int ty = iy + d.pad - ky, tx = ix + d.pad - kx;  // = oy * stride, = ox * stride
    if (ty < 0 || tx < 0 || ty % d.stride || tx % d.stride) return 0.f;
    const int oy = ty / d.stride, ox = tx / d.stride;
    if (oy >= d.oh || ox >= d.ow) return 0.f;
    return to_f32(dy[((int64_t(n) * d.co + o) * d.oh + oy) * d.ow + ox]);
  }
  __device__ float b(int64_t k, int64_t c) const {
    const int64_t taps = int64_t(d.kh) * d.kw, o = k / taps;
    return to_f32(w[(o * d.ci + c) * taps + k % taps]);
  }
  __device__ int64_t out_index(int64_t m, int64_t c) const {
    const int64_t plane = int64_t(d.h) * d.w, n = m / plane;
    return (n * d.ci + c) * plane + m % plane;
  }
};

// backward-filter: A[o][k] = dy[n][o][oy][ox], k = (n, oy, ox); B[k][j] = x window, j = (ci, ky, kx);
// C = dw [co][ci*kh*kw].
template <typename T>
struct BackwardFilter {
  Dims d;
  const T *x, *dy;
  __device__ int64_t rows() const { return d.co; }
  __device__ int64_t cols() const { return int64_t(d.ci) * d.kh * d.kw; }
  __device__ int64_t depth() const { return int64_t(d.n) * d.oh * d.ow; }
  __device__ float a(int64_t o, int64_t k) const {
    const int64_t plane = int64_t(d.oh) * d.ow, n = k / plane;
    return to_f32(dy[(n * d.co + o) * plane + k % plane]);
  }
  __device__ float b(int64_t k, int64_t j) const { return window(d, x, k, j); }
  __device__ int64_t out_index(int64_t o, int64_t j) const { return o * cols() + j; }
};

// C tile (kBM x kBN) of the product over K range [k0, k1) of slice blockIdx.z. With out != null,
// writes out[out_index] = acc + bias; else writes the partial sums to scratch[z][m][n].
template <typename T, typename P>
__global__ void __launch_bounds__(256) igemm_kernel(P p, const T* bias, T* out, float* scratch, int64_t k_per_slice) {
  __shared__ float as[kBK][kBM];
  __shared__ float bs[kBK][kBN];
  const int64_t M = p.rows(), N = p.cols(), K = p.depth();
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int64_t k_begin = int64_t(blockIdx.z) * k_per_slice, k_end = min(K, k_begin + k_per_slice);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // 16 x 16 threads, 4 x 4 outputs each
  float acc[4][4] = {};
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK) {
    for (int e = threadIdx.x; e < kBK * kBM; e += blockDim.x) {  // 1024 loads of each tile
      const int kk = e / kBM, mm = e % kBM;
      const int64_t k = k0 + kk;
      as[kk][mm] = (k < k_end && m0 + mm < M) ? p.a(m0 + mm, k) : 0.f;
      const int nn = e % kBN;
      bs[kk][nn] = (k < k_end && n0 + nn < N) ? p.b(k, n0 + nn) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float ra[4], rb[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) ra[i] = as[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) rb[j] = bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty * 4 + i;
    if (m >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (n >= N) continue;
      if (out) out[p.out_index(m, n)] = from_f32<T>(acc[i][j] + (bias ? to_f32(bias[n]) : 0.f));
      else scratch[(int64_t(blockIdx.z) * M + m) * N + n] = acc[i][j];
    }
  }
}

// The tensor-core version of igemm_kernel for half types: 128 threads, 64x64 tile, 32-deep K
// steps; each warp owns a 32x32 quarter as 2x2 WMMA fragments accumulating in fp32, which go
// through shared memory to the same epilogue as the CUDA-core kernel.
constexpr int kWK = 32, kPadAB = 8, kPadC = 4;  // pads keep WMMA's ldm a multiple of 16 bytes

template <typename T, typename P>
__global__ void __launch_bounds__(128) igemm_wmma_kernel(P p, const T* bias, T* out, float* scratch,
                                                         int64_t k_per_slice) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) T as[kBM][kWK + kPadAB];  // [m][k]
  __shared__ __align__(32) T bs[kWK][kBN + kPadAB];  // [k][n]
  __shared__ __align__(32) float cs[kBM][kBN + kPadC];
  const int64_t M = p.rows(), N = p.cols(), K = p.depth();
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int64_t k_begin = int64_t(blockIdx.z) * k_per_slice, k_end = min(K, k_begin + k_per_slice);
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kWK) {
    for (int e = threadIdx.x; e < kBM * kWK; e += blockDim.x) {  // 2048 of each tile, 16 per thread
      const int mm = e / kWK, kk = e % kWK;
      const int64_t k = k0 + kk;
      as[mm][kk] = from_f32<T>((k < k_end && m0 + mm < M) ? p.a(m0 + mm, k) : 0.f);
      const int kb = e / kBN, nn = e % kBN;
      const int64_t kb_abs = k0 + kb;
      bs[kb][nn] = from_f32<T>((kb_abs < k_end && n0 + nn < N) ? p.b(kb_abs, n0 + nn) : 0.f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kWK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &as[wm * 32 + i * 16][kk], kWK + kPadAB);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &bs[kk][wn * 32 + j * 16], kBN + kPadAB);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], kBN + kPadC, wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < kBM * kBN; e += blockDim.x) {
    const int mm = e / kBN, nn = e % kBN;
    const int64_t m = m0 + mm, n = n0 + nn;
    if (m >= M || n >= N) continue;
    if (out) out[p.out_index(m, n)] = from_f32<T>(cs[mm][nn] + (bias ? to_f32(bias[n]) : 0.f));
    else scratch[(int64_t(blockIdx.z) * M + m) * N + n] = cs[mm][nn];
  }
}

// Launches the kernel for T: CUDA cores for float, tensor cores for the half types. k_step: the
// K-slice granularity the kernel needs.
template <typename T, typename P>
void launch_igemm(dim3 grid, Stream st, const P& p, const T* bias, T* out, float* scratch, int64_t k_per_slice) {
  if constexpr (std::is_same_v<T, float>)
    igemm_kernel<T><<<grid, 256, 0, as_cuda(st)>>>(p, bias, out, scratch, k_per_slice);
  else
    igemm_wmma_kernel<T><<<grid, 128, 0, as_cuda(st)>>>(p, bias, out, scratch, k_per_slice);
}
template <typename T> constexpr int64_t k_step() { return std::is_same_v<T, float> ? kBK : kWK; }

// out[o][j] = sum over slices in order: deterministic split-K.
template <typename T>
__global__ void sum_slices_kernel(int64_t mn, int slices, const float* scratch, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < mn; i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (int z = 0; z < slices; ++z) s += scratch[z * mn + i];
    out[i] = from_f32<T>(s);
  }
}

// db[o] = sum of dy over n, oy, ox: one block per channel, fixed tree order.
template <typename T>
__global__ void bias_grad_kernel(Dims d, const T* dy, T* db) {
  __shared__ float shared[kThreads];
  const int o = blockIdx.x;
  const int64_t plane = int64_t(d.oh) * d.ow, total = int64_t(d.n) * plane;
  float s = 0;
  for (int64_t k = threadIdx.x; k < total; k += blockDim.x) s += to_f32(dy[(k / plane * d.co + o) * plane + k % plane]);
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[o] = from_f32<T>(shared[0]);
}

dim3 grid_for(int64_t rows, int64_t cols, int slices) {
  return dim3(unsigned((cols + kBN - 1) / kBN), unsigned((rows + kBM - 1) / kBM), unsigned(slices));
}

template <typename T>
struct Run {
  static void forward(const Conv2dShape& s, const void* x, const void* w, const void* bias, void* y, Stream st) {
    const Dims d = dims_of(s);
    Forward<T> p{d, static_cast<const T*>(x), static_cast<const T*>(w)};
    const int64_t M = int64_t(d.n) * d.oh * d.ow, K = int64_t(d.ci) * d.kh * d.kw;
    launch_igemm<T>(grid_for(M, d.co, 1), st, p, static_cast<const T*>(bias), static_cast<T*>(y), nullptr, K);
    CG_CUDA_AFTER_LAUNCH("conv2d_native_forward");
  }
  static void backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx, Stream st) {
    const Dims d = dims_of(s);
    BackwardData<T> p{d, static_cast<const T*>(dy), static_cast<const T*>(w)};
    const int64_t M = int64_t(d.n) * d.h * d.w, K = int64_t(d.co) * d.kh * d.kw;
    launch_igemm<T>(grid_for(M, d.ci, 1), st, p, nullptr, static_cast<T*>(dx), nullptr, K);
    CG_CUDA_AFTER_LAUNCH("conv2d_native_backward_data");
  }
  static void backward_filter(const Conv2dShape& s, const void* x, const void* dy, void* dw, void* db, Stream st) {
    const Dims d = dims_of(s);
    BackwardFilter<T> p{d, static_cast<const T*>(x), static_cast<const T*>(dy)};
    const int64_t M = d.co, N = int64_t(d.ci) * d.kh * d.kw, K = int64_t(d.n) * d.oh * d.ow;
    // Enough slices to give the GPU a few hundred blocks, each slice a whole number of K steps.
    const int64_t tiles = ((M + kBM - 1) / kBM) * ((N + kBN - 1) / kBN);
    const int slices = int(std::max<int64_t>(1, std::min<int64_t>(std::min<int64_t>(512 / tiles, 64), K / 256)));
    const int64_t per_slice = ((K + slices - 1) / slices + k_step<T>() - 1) / k_step<T>() * k_step<T>();
    float* scratch = static_cast<float*>(scratch_alloc(size_t(slices) * size_t(M * N) * sizeof(float), st));
    launch_igemm<T>(grid_for(M, N, slices), st, p, nullptr, nullptr, scratch, per_slice);
    CG_CUDA_AFTER_LAUNCH("conv2d_native_backward_filter");
    sum_slices_kernel<T><<<blocks_for(M * N), kThreads, 0, as_cuda(st)>>>(M * N, slices, scratch, static_cast<T*>(dw));
    CG_CUDA_AFTER_LAUNCH("conv2d_native_backward_filter sum");
    scratch_free(scratch, st);
    if (db) {
      bias_grad_kernel<T><<<d.co, kThreads, 0, as_cuda(st)>>>(d, static_cast<const T*>(dy), static_cast<T*>(db));
      CG_CUDA_AFTER_LAUNCH("conv2d_native bias_grad");
    }
  }
};

template <typename T> struct RunForward { template <typename... A> static void run(A&&... a) { Run<T>::forward(a...); } };
template <typename T> struct RunData { template <typename... A> static void run(A&&... a) { Run<T>::backward_data(a...); } };
template <typename T> struct RunFilter { template <typename... A> static void run(A&&... a) { Run<T>::backward_filter(a...); } };

}  // namespace

bool conv2d_native_supports(const Conv2dShape& s, DType dtype) {
  const bool type_ok = dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
  // int indices inside the kernels
  const int64_t biggest = std::max({s.n * s.c_in * s.h * s.w, s.n * s.c_out * s.out_h() * s.out_w()});
  return type_ok && biggest < (int64_t(1) << 31);
}

void conv2d_native_forward(const Conv2dShape& s, DType dtype, const void* x, const void* w, const void* bias, void* y,
                           Stream stream) {
  dispatch_floating<RunForward>("conv2d_native_forward", dtype, s, x, w, bias, y, stream);
}

void conv2d_native_backward_data(const Conv2dShape& s, DType dtype, const void* dy, const void* w, void* dx,
                                 Stream stream) {
  dispatch_floating<RunData>("conv2d_native_backward_data", dtype, s, dy, w, dx, stream);
}

void conv2d_native_backward_filter(const Conv2dShape& s, DType dtype, const void* x, const void* dy, void* dw,
                                   void* db, Stream stream) {
  dispatch_floating<RunFilter>("conv2d_native_backward_filter", dtype, s, x, dy, dw, db, stream);
}

}  // namespace cg::kernels::cuda
