// The one tiled implicit-GEMM kernel behind the hand-written convolution (conv_native_*.cu):
// C[M][N] = sum over k of A[m][k] * B[k][n], 128x64 output tiles, 256 threads. A "problem"
// (forward, backward-data, backward-filter) gathers its A and B tiles straight from NCHW memory
// and drains the C tile through its own epilogue; this file owns shared memory, the double
// buffering and the math: WMMA 16x16x16 with fp32 accumulators for the half types, fp32 FMA for
// float. Rule: a problem writes every tile element it gathers, zero outside the image or matrix.
#pragma once
#include <mma.h>

#include <type_traits>

#include "kernels/types.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda::conv_native {

constexpr int kTileThreads = 256;  // 8 warps: 4 along M x 2 along N, 32x32 outputs each
constexpr int kBM = 128, kBN = 64;
constexpr int kLdC = kBM + 4;  // the fp32 C tile, stored [n][m]
constexpr int kSmemBytes = int(sizeof(float)) * kBN * kLdC;  // the A/B buffers fit under it

// Tile depth and shared-memory strides per element type. Half types: 16-byte pads keep WMMA's
// leading dimension a multiple of 8 elements and put consecutive rows on different banks.
template <typename T>
struct TileShape {
  static constexpr bool kTensorCores = !std::is_same_v<T, float>;
  static constexpr int kBK = kTensorCores ? 32 : 16;
  static constexpr int kLdACol = kBM + (kTensorCores ? 8 : 4);  // A stored [k][m]
  static constexpr int kLdARow = kBK + (kTensorCores ? 8 : 1);  // A stored [m][k]
  static constexpr int kLdB = kBK + (kTensorCores ? 8 : 1);     // B stored [n][k]
  static constexpr int kAPerThread = kBM * kBK / kTileThreads;
  static constexpr int kBPerThread = kBN * kBK / kTileThreads;
  static constexpr int kKRowsPerPass = kTileThreads / kBM;  // A [k][m]: k rows one pass covers
  static constexpr int kRowsPerPass = kTileThreads / kBK;   // A [m][k] and B [n][k]: rows per pass
};

// Which tile element each thread gathers; problems and the kernel must agree, so both use these.
//   A stored [k][m] (kARowMajor false): element i of thread t is m = t % kBM, k = t / kBM + i * kKRowsPerPass.
//   A stored [m][k] (kARowMajor true):  m = t / kBK + i * kRowsPerPass, k = t % kBK.
//   B stored [n][k]:                     n = t / kBK + i * kRowsPerPass, k = t % kBK.
//   C epilogue [n][m]:                   m = t % kBM, n = t / kBM + i * kEpilogueNStep, i < kEpiloguePerThread.
constexpr int kEpilogueNStep = kTileThreads / kBM;
constexpr int kEpiloguePerThread = kBM * kBN / kTileThreads;

// The convolution's sizes as ints: conv2d_native_supports() keeps every index below 2^31.
struct Dims {
  int n, ci, h, w, co, kh, kw, stride, pad, oh, ow;
};
inline Dims dims_of(const Conv2dShape& s) {
  return {int(s.n), int(s.c_in), int(s.h), int(s.w), int(s.c_out), int(s.kh), int(s.kw), int(s.stride),
          int(s.pad), int(s.out_h()), int(s.out_w())};
}

// A filter index k = (c, ky, kx), kx fastest. KH/KW = 0: sizes known only at run time; otherwise
// the divisions are by constants and cost a multiply.
template <int KH, int KW>
struct Taps {
  int kh_, kw_;
  __device__ __forceinline__ int kh() const { return KH ? KH : kh_; }
  __device__ __forceinline__ int kw() const { return KW ? KW : kw_; }
  __device__ __forceinline__ int count() const { return kh() * kw(); }
  __device__ __forceinline__ void split(int k, int& c, int& ky, int& kx) const {
    c = k / count();
    const int r = k - c * count();
    ky = r / kw();
    kx = r - ky * kw();
  }
};

template <typename T>
__device__ __forceinline__ T zero() { return from_f32<T>(0.f); }

// Where a GEMM index over pixels, idx = (image, y, x) with planes `width` wide, lies; `inside`
// says whether it is a real pixel (an index past the end maps to the first, never read).
struct PlanePixel {
  bool ok;
  int image, pixel, y, x;
};
__device__ __forceinline__ PlanePixel locate_pixel(int idx, bool inside, int plane, int width) {
  PlanePixel p;
  p.ok = inside;
  const int i = inside ? idx : 0;
  p.image = i / plane;
  p.pixel = i - p.image * plane;
  p.y = p.pixel / width;
  p.x = p.pixel - p.y * width;
  return p;
}

// Element (c, iy, ix) of the NCHW image at `img` (d.ci x d.h x d.w), zero in the padding around
// it and when !ok: an input window's tap.
template <typename T>
__device__ __forceinline__ T image_at(const T* img, const Dims& d, bool ok, int c, int iy, int ix) {
  return ok && unsigned(iy) < unsigned(d.h) && unsigned(ix) < unsigned(d.w) ? img[(c * d.h + iy) * d.w + ix] : zero<T>();
}

// Drains this thread's share of a C tile (layout above) whose rows m = (image, pixel) are pixels
// and whose columns n are channels into the NCHW tensor `out` of `channels` x `plane`, adding
// bias[n] when a bias is given. The caller skips rows past the last pixel.
// `pixel` is this thread's row m0 + threadIdx.x % kBM, an element of channel 0 of its image; the
// channels follow `plane` elements apart.
template <typename T>
__device__ void store_channels(const float* cs, int n0, int channels, int plane, const T* bias, T* pixel) {
  const int m_local = int(threadIdx.x) % kBM;
  for (int i = 0; i < kEpiloguePerThread; ++i) {
    const int n_local = int(threadIdx.x) / kBM + i * kEpilogueNStep, n = n0 + n_local;
    if (n >= channels) break;
    float v = cs[n_local * kLdC + m_local];
    if (bias) v += to_f32(bias[n]);
    pixel[int64_t(n) * plane] = from_f32<T>(v);
  }
}
template <typename T>
__device__ void store_nchw_tile(const float* cs, int m0, int n0, int channels, int plane, const T* bias, T* out) {
  const int m = m0 + int(threadIdx.x) % kBM, image = m / plane;
  store_channels(cs, n0, channels, plane, bias, out + int64_t(image) * channels * plane + (m - image * plane));
}

// Tensor-core math for the half types: warp (wm, wn) owns rows wm*32.. and columns wn*32.. as
// 2x2 fragments.
template <typename T, bool kARowMajor>
struct WmmaMath {
  using S = TileShape<T>;
  using ALayout = std::conditional_t<kARowMajor, nvcuda::wmma::row_major, nvcuda::wmma::col_major>;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[2][2];

  __device__ void init() {
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.f);
  }
  __device__ void step(const T* as, const T* bs) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, wm = warp % 4, wn = warp / 4;
#pragma unroll
    for (int kk = 0; kk < S::kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int m = wm * 32 + i * 16;
        if constexpr (kARowMajor) wmma::load_matrix_sync(a[i], as + m * S::kLdARow + kk, S::kLdARow);
        else wmma::load_matrix_sync(a[i], as + kk * S::kLdACol + m, S::kLdACol);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], bs + (wn * 32 + j * 16) * S::kLdB + kk, S::kLdB);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  __device__ void store(float* cs) {  // cs[n][m]
    const int warp = threadIdx.x / 32, wm = warp % 4, wn = warp / 4;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        nvcuda::wmma::store_matrix_sync(cs + (wn * 32 + j * 16) * kLdC + wm * 32 + i * 16, acc[i][j], kLdC,
                                        nvcuda::wmma::mem_col_major);
  }
};

// CUDA-core math for float: thread (tx, ty) owns rows ty + 16i and columns tx + 16j; the strided
// ownership keeps the B reads of a warp on distinct banks.
template <bool kARowMajor>
struct FmaMath {
  using S = TileShape<float>;
  float acc[8][4];

  __device__ void init() {
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  }
  __device__ void step(const float* as, const float* bs) {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (int kk = 0; kk < S::kBK; ++kk) {
      float ra[8], rb[4];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        ra[i] = kARowMajor ? as[(ty + 16 * i) * S::kLdARow + kk] : as[kk * S::kLdACol + ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) rb[j] = bs[(tx + 16 * j) * S::kLdB + kk];
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
  }
  __device__ void store(float* cs) {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) cs[(tx + 16 * j) * kLdC + ty + 16 * i] = acc[i][j];
  }
};

template <typename T, bool kARowMajor>
using TileMath = std::conditional_t<TileShape<T>::kTensorCores, WmmaMath<T, kARowMajor>, FmaMath<kARowMajor>>;

// One C tile: block (x, y) covers rows x*kBM.., columns y*kBN..; z is the problem's K slice.
// The next K step's elements are gathered into registers while the tensor cores work on the
// current one, then stored to the other shared buffer: one barrier per K step.
template <typename T, typename Problem>
__global__ void __launch_bounds__(kTileThreads, 2) tile_kernel(Problem problem) {
  using S = TileShape<T>;
  constexpr bool kARow = Problem::kARowMajor;
  constexpr int kASize = kARow ? kBM * S::kLdARow : S::kBK * S::kLdACol;
  constexpr int kBSize = kBN * S::kLdB;
  static_assert(2 * (kASize + kBSize) * int(sizeof(T)) <= kSmemBytes, "A/B buffers must fit under C");
  static_assert((kASize * sizeof(T)) % 32 == 0 && (kBSize * sizeof(T)) % 32 == 0, "WMMA needs 32-byte alignment");
  CG_SHARED(__align__(128) unsigned char, smem, [kSmemBytes]);
  T* as = reinterpret_cast<T*>(smem);  // [2][kASize]
  T* bs = as + 2 * kASize;             // [2][kBSize]
  float* cs = reinterpret_cast<float*>(smem);  // [kBN][kLdC], reused after the main loop

  Problem p = problem;
  p.setup(int(blockIdx.x) * kBM, int(blockIdx.y) * kBN, int(blockIdx.z));
  const int t = threadIdx.x;
  T ra[S::kAPerThread], rb[S::kBPerThread];
  auto stage = [&](int buf) {
    T* a = as + buf * kASize;
    T* b = bs + buf * kBSize;
#pragma unroll
    for (int i = 0; i < S::kAPerThread; ++i) {
      if constexpr (kARow) a[(t / S::kBK + i * S::kRowsPerPass) * S::kLdARow + t % S::kBK] = ra[i];
      else a[(t / kBM + i * S::kKRowsPerPass) * S::kLdACol + t % kBM] = ra[i];
    }
#pragma unroll
    for (int i = 0; i < S::kBPerThread; ++i) b[(t / S::kBK + i * S::kRowsPerPass) * S::kLdB + t % S::kBK] = rb[i];
  };

  TileMath<T, kARow> math;
  math.init();
  if (p.k_begin < p.k_end) {
    p.load_a(p.k_begin, ra);
    p.load_b(p.k_begin, rb);
    stage(0);
  }
  __syncthreads();
  int buf = 0;
  for (int k0 = p.k_begin; k0 < p.k_end; k0 += S::kBK) {
    const bool more = k0 + S::kBK < p.k_end;
    if (more) {  // loads in flight during the math below
      p.load_a(k0 + S::kBK, ra);
      p.load_b(k0 + S::kBK, rb);
    }
    math.step(as + buf * kASize, bs + buf * kBSize);
    if (more) stage(buf ^ 1);  // the other buffer: nobody reads it since the last barrier
    __syncthreads();
    buf ^= 1;
  }
  math.store(cs);  // A/B buffers are dead: every warp passed the last barrier
  __syncthreads();
  p.epilogue(cs);
}

// Launches tile_kernel over an M x N output in `slices` K slices.
template <typename T, typename Problem>
void launch_tiles(const Problem& p, int64_t rows, int64_t cols, int slices, Stream stream, const char* what) {
  if (rows == 0 || cols == 0) return;
  const dim3 grid(unsigned((rows + kBM - 1) / kBM), unsigned((cols + kBN - 1) / kBN), unsigned(slices));
  launch_kernel(tile_kernel<T, Problem>, what, grid, kTileThreads, 0, as_cuda(stream), p);
}

// Calls Run<KH, KW>::run(args...) with the filter size as constants where a specialization exists
// (3x3 and 1x1, MiniResNet's), else with KH = KW = 0 (sizes read at run time).
template <template <int, int> class Run, typename... Args>
void dispatch_taps(const Conv2dShape& s, Args&&... args) {
  if (s.kh == 3 && s.kw == 3) return Run<3, 3>::run(s, std::forward<Args>(args)...);
  if (s.kh == 1 && s.kw == 1) return Run<1, 1>::run(s, std::forward<Args>(args)...);
  return Run<0, 0>::run(s, std::forward<Args>(args)...);
}

}  // namespace cg::kernels::cuda::conv_native
