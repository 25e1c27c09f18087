// Backward convolution as implicit GEMMs (conv_native_tiles.cuh).
// Backward-data, one GEMM per phase of the stride (Phase below): rows = the phase's input pixels
// (n, iy, ix), columns = input channels, depth = (c_out, ky, kx) over the taps that reach those
// pixels, 2.25 of 9 on average for a 3x3 filter at stride 2; A is dy at the output that saw the
// pixel through the tap (zero past the image's edge), B[k][c] = w[c_out][c][ky][kx].
// Backward-filter computes dw transposed: rows = taps j = (c_in, ky, kx), columns = c_out, depth =
// output pixels (n, oy, ox), which is long, so it is split into a fixed number of K slices (a
// function of the shape only) whose fp32 partials go to stream-ordered scratch and are added in
// slice order by a second kernel: bit-identical run to run, no atomics. db likewise.
#include <algorithm>

#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/conv_native_tiles.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear.h"

namespace cg::kernels::cuda {
namespace conv_native {
namespace {

// The input pixels of one phase (py, px) of the stride s: those with (iy + pad) % s == py and
// (ix + pad) % s == px. Only the taps ky = py + s a, kx = px + s b reach them, and tap (a, b) reaches
// pixel (iy, ix) = (iy_first + s j, ix_first + s i) from output (qy0 + j - a, qx0 + i - b): a
// stride-1 convolution of dy with the phase's taps. Stride 1 has one phase, every tap.
struct Phase {
  int py, px;             // the taps' offsets
  int taps_y, taps_x;     // the phase's taps along each axis (0 where the offset lies past the filter: 1x1 at stride 2)
  int iy_first, ix_first;  // the phase's first input row and column
  int rows, cols;          // its pixels per image: rows x cols
  int qy0, qx0;            // (iy_first + pad - py) / s, likewise for x
};
Phase phase_of(const Dims& d, int py, int px) {
  auto axis = [&](int p, int kernel, int size, int& taps, int& first, int& count, int& q0) {
    taps = p < kernel ? (kernel - p + d.stride - 1) / d.stride : 0;
    first = ((p - d.pad) % d.stride + d.stride) % d.stride;
    count = first < size ? (size - first + d.stride - 1) / d.stride : 0;
    q0 = (first + d.pad - p) / d.stride;
  };
  Phase f{py, px, 0, 0, 0, 0, 0, 0, 0, 0};
  axis(py, d.kh, d.h, f.taps_y, f.iy_first, f.rows, f.qy0);
  axis(px, d.kw, d.w, f.taps_x, f.ix_first, f.cols, f.qx0);
  return f;
}

// One phase: rows m = (image, j, i) over the phase's pixels, depth k = (c_out, a, b) over its taps.
// NTY, NTX: the phase's tap counts when known at compile time, else 0.
template <typename T, int NTY, int NTX>
struct BackwardDataProblem {
  using S = TileShape<T>;
  static constexpr bool kARowMajor = false;
  Dims d;
  Phase f;
  Taps<NTY, NTX> taps;  // (a, b), f.taps_y x f.taps_x
  const T* __restrict__ dy;
  const T* __restrict__ w;
  T* __restrict__ dx;
  int m0 = 0, n0 = 0, k_begin = 0, k_end = 0;
  bool m_ok = false;
  int64_t dy_image = 0;  // offset of the pixel's image in dy
  int qy = 0, qx = 0;    // tap (a, b) reaches the pixel from output (qy - a, qx - b)
  T* pixel = nullptr;    // the pixel in channel 0 of dx

  __device__ void setup(int bm, int bn, int /*slice*/) {
    m0 = bm;
    n0 = bn;
    k_begin = 0;
    k_end = d.co * taps.count();
    const int m = m0 + int(threadIdx.x) % kBM;
    m_ok = m < d.n * f.rows * f.cols;
    const PlanePixel p = locate_pixel(m, m_ok, f.rows * f.cols, f.cols);
    dy_image = int64_t(p.image) * d.co * d.oh * d.ow;
    qy = f.qy0 + p.y;
    qx = f.qx0 + p.x;
    const int iy = f.iy_first + d.stride * p.y, ix = f.ix_first + d.stride * p.x;
    pixel = dx + int64_t(p.image) * d.ci * d.h * d.w + iy * d.w + ix;
  }
  __device__ void load_a(int k0, T (&r)[S::kAPerThread]) const {
    const T* img = dy + dy_image;
#pragma unroll
    for (int i = 0; i < S::kAPerThread; ++i) {
      const int k = k0 + int(threadIdx.x) / kBM + i * S::kKRowsPerPass;
      int o, a, b;
      taps.split(k, o, a, b);
      const int oy = qy - a, ox = qx - b;
      const bool ok = m_ok && k < k_end && unsigned(oy) < unsigned(d.oh) && unsigned(ox) < unsigned(d.ow);
      r[i] = ok ? img[(o * d.oh + oy) * d.ow + ox] : zero<T>();
    }
  }
  __device__ void load_b(int k0, T (&r)[S::kBPerThread]) const {
    const int k = k0 + int(threadIdx.x) % S::kBK;
    int o, a, b;
    taps.split(k, o, a, b);
    const int filter = d.kh * d.kw, tap = (f.py + d.stride * a) * d.kw + f.px + d.stride * b;
    const int64_t base = int64_t(o) * d.ci * filter + tap;  // w[o][c][tap] = base + c * filter
#pragma unroll
    for (int i = 0; i < S::kBPerThread; ++i) {
      const int c = n0 + int(threadIdx.x) / S::kBK + i * S::kRowsPerPass;
      r[i] = (k < k_end && c < d.ci) ? w[base + int64_t(c) * filter] : zero<T>();
    }
  }
  __device__ void epilogue(const float* cs) const {
    if (m_ok) store_channels(cs, n0, d.ci, d.h * d.w, static_cast<const T*>(nullptr), pixel);
  }
};

// dw transposed, one K slice per blockIdx.z: partial[slice][o][j] (fp32).
template <typename T, int KH, int KW>
struct BackwardFilterProblem {
  using S = TileShape<T>;
  static constexpr bool kARowMajor = true;
  Dims d;
  Taps<KH, KW> taps;
  const T* __restrict__ x;
  const T* __restrict__ dy;
  float* __restrict__ partial;
  int k_per_slice;  // a multiple of kBK
  int m0 = 0, n0 = 0, k_begin = 0, k_end = 0, slice = 0;

  __device__ void setup(int bm, int bn, int z) {
    m0 = bm;
    n0 = bn;
    slice = z;
    const int depth = d.n * d.oh * d.ow;
    k_begin = int(min(int64_t(depth), int64_t(z) * k_per_slice));
    k_end = min(depth, k_begin + k_per_slice);
  }
  // This thread's depth index k = (image, output pixel) of a K step, shared by its A and B loads.
  __device__ PlanePixel pixel_of(int k0) const {
    const int k = k0 + int(threadIdx.x) % S::kBK;
    return locate_pixel(k, k < k_end, d.oh * d.ow, d.ow);
  }
  __device__ void load_a(int k0, T (&r)[S::kAPerThread]) const {  // x window, rows j = (c, ky, kx)
    const PlanePixel p = pixel_of(k0);
    const T* img = x + int64_t(p.image) * d.ci * d.h * d.w;
    const int iy0 = p.y * d.stride - d.pad, ix0 = p.x * d.stride - d.pad, rows = d.ci * taps.count();
#pragma unroll
    for (int i = 0; i < S::kAPerThread; ++i) {
      const int j = m0 + int(threadIdx.x) / S::kBK + i * S::kRowsPerPass;
      int c, ky, kx;
      taps.split(j, c, ky, kx);
      r[i] = image_at(img, d, p.ok && j < rows, c, iy0 + ky, ix0 + kx);
    }
  }
  __device__ void load_b(int k0, T (&r)[S::kBPerThread]) const {  // dy, columns o
    const PlanePixel p = pixel_of(k0);
    const int plane = d.oh * d.ow;
    const T* g = dy + int64_t(p.image) * d.co * plane + p.pixel;
#pragma unroll
    for (int i = 0; i < S::kBPerThread; ++i) {
      const int o = n0 + int(threadIdx.x) / S::kBK + i * S::kRowsPerPass;
      r[i] = (p.ok && o < d.co) ? g[int64_t(o) * plane] : zero<T>();
    }
  }
  __device__ void epilogue(const float* cs) const {
    const int rows = d.ci * taps.count(), m_local = int(threadIdx.x) % kBM, j = m0 + m_local;
    if (j >= rows) return;
    float* out = partial + int64_t(slice) * d.co * rows + j;
    for (int i = 0; i < kEpiloguePerThread; ++i) {
      const int n_local = int(threadIdx.x) / kBM + i * kEpilogueNStep, o = n0 + n_local;
      if (o >= d.co) break;
      out[int64_t(o) * rows] = cs[n_local * kLdC + m_local];
    }
  }
};

// out[i] = sum of partial[z][i] over z = 0, 1, ... in order.
template <typename T>
__global__ void sum_slices_kernel(int64_t count, int slices, const float* __restrict__ partial, T* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int z = 0; z < slices; ++z) s += partial[z * count + i];
    out[i] = from_f32<T>(s);
  }
}

// db[o] = sum of dy over n, oy, ox: one block per channel, per-thread sums in a fixed order, then
// block_sum's fixed tree.
template <typename T>
__global__ void bias_grad_kernel(Dims d, const T* __restrict__ dy, T* __restrict__ db) {
  CG_SHARED(double, shared, [kThreads]);
  const int o = blockIdx.x, plane = d.oh * d.ow;
  float s = 0.f;
  for (int image = 0; image < d.n; ++image) {
    const T* g = dy + (int64_t(image) * d.co + o) * plane;
    for (int p = threadIdx.x; p < plane; p += blockDim.x) s += to_f32(g[p]);
  }
  const double total = block_sum(double(s), shared);
  if (threadIdx.x == 0) db[o] = from_f32<T>(float(total));
}

// Slices for backward-filter: enough blocks in all to fill an H100 about twice (132 SMs, two
// blocks each), none shorter than 8 K steps. A function of the shape only, never of the device,
// so results do not change from one GPU to another.
constexpr int64_t kFilterTargetBlocks = 2 * 2 * 132, kMinSliceSteps = 8, kMaxSlices = 256;
int filter_slices(int64_t rows, int64_t cols, int64_t depth, int64_t k_step) {
  const int64_t tiles = ((rows + kBM - 1) / kBM) * ((cols + kBN - 1) / kBN);
  const int64_t by_blocks = (kFilterTargetBlocks + tiles - 1) / tiles;
  const int64_t by_depth = std::max<int64_t>(1, depth / (kMinSliceSteps * k_step));
  return int(std::clamp<int64_t>(std::min(by_blocks, by_depth), 1, kMaxSlices));
}

template <typename T>
struct BiasGrad {
  static void run(const Conv2dShape& s, const void* dy, void* db, Stream stream) {
    const Dims d = dims_of(s);
    launch_kernel(bias_grad_kernel<T>, "conv2d bias grad", d.co, kThreads, 0, as_cuda(stream), d,
                  static_cast<const T*>(dy), static_cast<T*>(db));
  }
};

// One launch per phase, s * s in all. A phase without taps (a 1x1 filter's pixels that stride 2
// skips) has an empty depth, so its tiles write zeros.
template <typename T>
struct BackwardData {
  template <int NTY, int NTX>
  static void launch(const Dims& d, const Phase& f, const void* dy, const void* w, void* dx, Stream stream) {
    const BackwardDataProblem<T, NTY, NTX> p{
        d, f, {f.taps_y, f.taps_x}, static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx)};
    launch_tiles<T>(p, int64_t(d.n) * f.rows * f.cols, d.ci, 1, stream, "conv2d_native_backward_data");
  }
  // The tap counts as constants where MiniResNet has them (3x3 at stride 1 and 2, 1x1 at both).
  static void launch_phase(const Dims& d, const Phase& f, const void* dy, const void* w, void* dx, Stream stream) {
    const int ty = f.taps_y, tx = f.taps_x;
    if (ty == 3 && tx == 3) return launch<3, 3>(d, f, dy, w, dx, stream);
    if (ty == 2 && tx == 2) return launch<2, 2>(d, f, dy, w, dx, stream);
    if (ty == 2 && tx == 1) return launch<2, 1>(d, f, dy, w, dx, stream);
    if (ty == 1 && tx == 2) return launch<1, 2>(d, f, dy, w, dx, stream);
    if (ty == 1 && tx == 1) return launch<1, 1>(d, f, dy, w, dx, stream);
    return launch<0, 0>(d, f, dy, w, dx, stream);
  }
  static void run(const Conv2dShape& s, const void* dy, const void* w, void* dx, Stream stream) {
    const Dims d = dims_of(s);
    for (int py = 0; py < d.stride; ++py)
      for (int px = 0; px < d.stride; ++px) {
        const Phase f = phase_of(d, py, px);
        if (f.rows > 0 && f.cols > 0) launch_phase(d, f, dy, w, dx, stream);
      }
  }
};

template <typename T>
struct BackwardFilter {
  template <int KH, int KW>
  struct Run {
    static void run(const Conv2dShape& s, const void* x, const void* dy, void* dw, void* db,
                    const WorkspaceFn& workspace, Stream stream) {
      const Dims d = dims_of(s);
      const int64_t rows = int64_t(d.ci) * d.kh * d.kw, cols = d.co, depth = int64_t(d.n) * d.oh * d.ow;
      const int64_t k_step = TileShape<T>::kBK;
      const int slices = filter_slices(rows, cols, depth, k_step);
      const int64_t per_slice = ((depth + slices - 1) / slices + k_step - 1) / k_step * k_step;
      float* partial = static_cast<float*>(workspace(sizeof(float) * size_t(slices * rows * cols)));
      const BackwardFilterProblem<T, KH, KW> p{d,
                                               {d.kh, d.kw},
                                               static_cast<const T*>(x),
                                               static_cast<const T*>(dy),
                                               partial,
                                               int(per_slice)};
      launch_tiles<T>(p, rows, cols, slices, stream, "conv2d_native_backward_filter");
      launch_kernel(sum_slices_kernel<T>, "conv2d_native_backward_filter (slice sum)", blocks_for(rows * cols),
                    kThreads, 0, as_cuda(stream), rows * cols, slices, partial, static_cast<T*>(dw));
      if (db) BiasGrad<T>::run(s, dy, db, stream);
    }
  };
  static void run(const Conv2dShape& s, const void* x, const void* dy, void* dw, void* db,
                  const WorkspaceFn& workspace, Stream stream) {
    dispatch_taps<Run>(s, x, dy, dw, db, workspace, stream);
  }
};

}  // namespace
}  // namespace conv_native

void conv2d_native_backward_data(const Conv2dShape& s, DType dtype, const void* dy, const void* w, void* dx,
                                 Stream stream) {
  dispatch_floating<conv_native::BackwardData>("conv2d_native_backward_data", dtype, s, dy, w, dx, stream);
}

void conv2d_native_backward_filter(const Conv2dShape& s, DType dtype, const void* x, const void* dy, void* dw,
                                   void* db, const WorkspaceFn& workspace, Stream stream) {
  dispatch_floating<conv_native::BackwardFilter>("conv2d_native_backward_filter", dtype, s, x, dy, dw, db, workspace,
                                                 stream);
}

void conv2d_bias_grad(const Conv2dShape& s, DType dtype, const void* dy, void* db, Stream stream, Layout layout) {
  // Channels last, dy is a [n * oh * ow, c_out] matrix: the linear layer's column sums.
  if (layout == Layout::nhwc) return linear_bias_grad(int64_t(s.n) * s.out_h() * s.out_w(), s.c_out, dtype, dy, db, stream);
  dispatch_floating<conv_native::BiasGrad>("conv2d bias grad", dtype, s, dy, db, stream);
}

}  // namespace cg::kernels::cuda
