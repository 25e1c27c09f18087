// Forward convolution as an implicit GEMM (conv_native_tiles.cuh): rows m = output pixels
// (n, oy, ox), columns = output channels, depth k = (c_in, ky, kx). A is the input window each
// output pixel sees, gathered from NCHW x with zeros in the padding; B[k][c] = w[c][k].
// Also conv2d_native_supports(), which all three directions share.
#include <algorithm>

#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/conv_native_tiles.cuh"

namespace cg::kernels::cuda {
namespace conv_native {
namespace {

template <typename T, int KH, int KW>
struct ForwardProblem {
  using S = TileShape<T>;
  static constexpr bool kARowMajor = false;
  Dims d;
  Taps<KH, KW> taps;
  const T* __restrict__ x;
  const T* __restrict__ w;
  const T* __restrict__ bias;  // may be null
  T* __restrict__ y;
  // Per thread, from setup(): the block's corner, the K range, and this thread's output pixel.
  int m0 = 0, n0 = 0, k_begin = 0, k_end = 0;
  bool m_ok = false;
  int64_t x_image = 0;  // offset of the pixel's image in x
  int iy0 = 0, ix0 = 0;  // input position of the window's top-left tap

  __device__ void setup(int bm, int bn, int /*slice*/) {
    m0 = bm;
    n0 = bn;
    k_begin = 0;
    k_end = d.ci * taps.count();
    const int plane = d.oh * d.ow, m = m0 + int(threadIdx.x) % kBM;
    m_ok = m < d.n * plane;
    const PlanePixel p = locate_pixel(m, m_ok, plane, d.ow);
    x_image = int64_t(p.image) * d.ci * d.h * d.w;
    iy0 = p.y * d.stride - d.pad;
    ix0 = p.x * d.stride - d.pad;
  }
  __device__ void load_a(int k0, T (&r)[S::kAPerThread]) const {
    const T* img = x + x_image;
#pragma unroll
    for (int i = 0; i < S::kAPerThread; ++i) {
      const int k = k0 + int(threadIdx.x) / kBM + i * S::kKRowsPerPass;
      int c, ky, kx;
      taps.split(k, c, ky, kx);
      r[i] = image_at(img, d, m_ok && k < k_end, c, iy0 + ky, ix0 + kx);
    }
  }
  __device__ void load_b(int k0, T (&r)[S::kBPerThread]) const {
    const int k = k0 + int(threadIdx.x) % S::kBK;
#pragma unroll
    for (int i = 0; i < S::kBPerThread; ++i) {
      const int n = n0 + int(threadIdx.x) / S::kBK + i * S::kRowsPerPass;
      r[i] = (k < k_end && n < d.co) ? w[int64_t(n) * k_end + k] : zero<T>();  // k_end = row length
    }
  }
  __device__ void epilogue(const float* cs) const {
    if (m_ok) store_nchw_tile(cs, m0, n0, d.co, d.oh * d.ow, bias, y);
  }
};

template <typename T>
struct Forward {
  template <int KH, int KW>
  struct Run {
    static void run(const Conv2dShape& s, const void* x, const void* w, const void* bias, void* y, Stream stream) {
      const Dims d = dims_of(s);
      const ForwardProblem<T, KH, KW> p{d,
                                        {d.kh, d.kw},
                                        static_cast<const T*>(x),
                                        static_cast<const T*>(w),
                                        static_cast<const T*>(bias),
                                        static_cast<T*>(y)};
      launch_tiles<T>(p, int64_t(d.n) * d.oh * d.ow, d.co, 1, stream, "conv2d_native_forward");
    }
  };
  static void run(const Conv2dShape& s, const void* x, const void* w, const void* bias, void* y, Stream stream) {
    dispatch_taps<Run>(s, x, w, bias, y, stream);
  }
};

}  // namespace
}  // namespace conv_native

bool conv2d_native_supports(const Conv2dShape& s, DType dtype) {
  const bool type_ok = dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
  const bool shape_ok = s.n > 0 && s.c_in > 0 && s.c_out > 0 && s.kh > 0 && s.kw > 0 && s.stride > 0 &&
                        s.pad >= 0 && s.h + 2 * s.pad >= s.kh && s.w + 2 * s.pad >= s.kw;
  // The kernels index with int: every tensor (and the im2col depth) must stay below 2^31 elements.
  const int64_t limit = int64_t(1) << 31;
  const int64_t biggest = std::max({s.n * s.c_in * s.h * s.w, s.n * s.c_out * s.out_h() * s.out_w(),
                                    s.c_out * s.c_in * s.kh * s.kw});
  return type_ok && shape_ok && biggest < limit;
}

void conv2d_native_forward(const Conv2dShape& s, DType dtype, const void* x, const void* w, const void* bias, void* y,
                           Stream stream) {
  dispatch_floating<conv_native::Forward>("conv2d_native_forward", dtype, s, x, w, bias, y, stream);
}

}  // namespace cg::kernels::cuda
