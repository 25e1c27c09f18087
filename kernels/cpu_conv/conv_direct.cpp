// The direct convolution behind conv_direct.h. Work per image: copy its channels into
// zero-bordered planes, then register tiles read the planes in place at the taps' offsets.
// Stride 2 splits each channel into its four phases (even/odd rows x even/odd columns), each a
// plane of its own, so every tap is again a plain offset into one of them. Output positions whose
// column falls past the output row (the planes' rows are a little longer), or past the last row,
// are computed and thrown away: the price of reading straight from the planes. For stride 1 and
// padding 1 a row is one column longer than the image (a row's right border is the next row's
// left border), and the last tile of an image is only as many vectors wide as it needs: 4% more
// positions than outputs at 28x28, 14% at 14x14.
#include "kernels/cpu_conv/conv_direct.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <vector>

#include "kernels/cpu_conv/conv_direct_planes.h"
#include "kernels/cpu_conv/float_rows.h"
#include "kernels/cpu_conv/scratch.h"

namespace cg::kernels::cpu {
namespace direct {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

Geometry geometry(const Conv2dShape& s) {
  Geometry g{s.h, s.w, s.out_h(), s.out_w(), s.stride, 0, 0, 0, 0, 0, int(s.kh * s.kw), {}};
  // Input row stride * y + k - pad = stride * (r - 1) + a: the tap reads row r = y + 1 + floor((k - pad) / stride).
  auto step = [&](int64_t k) { return 1 + floor_div(k - s.pad, s.stride); };
  auto phase = [&](int64_t k) { return k - s.pad - s.stride * floor_div(k - s.pad, s.stride); };
  const int64_t max_dr = step(s.kh - 1), max_ds = step(s.kw - 1);
  // Stride 1, padding 1: the last tap of a row's last output reads the zero column just past the
  // image, which can be the next row's first column (zero too: the left border) instead of a
  // column of its own. (Stride 2's odd phase has a pixel there; 1x1 layers read no border.)
  const bool shared_border = s.stride == 1 && s.pad == 1;
  g.wp = g.out_w + max_ds - (shared_border ? 1 : 0);
  g.rows = g.out_h + max_dr;
  g.positions = round_up(g.out_h * g.wp, kLanes);
  g.phase_plane = round_up(std::max(g.rows * g.wp, g.positions + max_dr * g.wp + max_ds) + kLanes, kLanes);
  g.plane = s.stride * s.stride * g.phase_plane;
  for (int64_t ky = 0; ky < s.kh; ++ky)
    for (int64_t kx = 0; kx < s.kw; ++kx)
      g.off[ky * s.kw + kx] = (phase(ky) * s.stride + phase(kx)) * g.phase_plane + step(ky) * g.wp + step(kx);
  return g;
}

float* scratch(int slot, size_t n) {
  thread_local Scratch<float> buffers[2];
  return buffers[slot].get(n);
}

// Each float is written once.
void pad_planes(const float* src, int64_t channels, const Geometry& g, float* dst) {
  const int64_t st = g.stride;
  for (int64_t c = 0; c < channels; ++c) {
    const float* image = src + c * g.h * g.w;
    if (c + 1 < channels) prefetch_plane(image + g.h * g.w, g.h * g.w);
    for (int64_t a = 0; a < st; ++a)
      for (int64_t b = 0; b < st; ++b) {
        float* p = dst + c * g.plane + (a * st + b) * g.phase_plane;
        // The columns s whose pixel st * (s - 1) + b lies inside [0, w): [s_lo, s_hi).
        const int64_t s_lo = 1, s_hi = std::min(g.wp, 1 + (g.w - b + st - 1) / st);
        for (int64_t r = 0; r < g.rows; ++r) {
          float* row = p + r * g.wp;
          const int64_t iy = st * (r - 1) + a;
          if (iy < 0 || iy >= g.h || s_hi <= s_lo) {
            zero_floats(row, g.wp);
            continue;
          }
          row[0] = 0.f;
          const float* in = image + iy * g.w + b;  // in[st * (s - 1)] is the pixel of column s
          if (st == 1) {
            copy_floats(in, s_hi - s_lo, row + s_lo);
          } else {
            copy_even_floats(in, s_hi - s_lo, row + s_lo);
          }
          zero_floats(row + s_hi, g.wp - s_hi);
        }
        zero_floats(p + g.rows * g.wp, g.phase_plane - g.rows * g.wp);
      }
  }
}

// Pixel (y, x) at y * wp + x, zeros in the columns past out_w and after the last row.
void widen_rows(const float* src, int64_t channels, const Geometry& g, int64_t count, float* dst) {
  for (int64_t c = 0; c < channels; ++c) {
    float* p = dst + c * count;
    for (int64_t y = 0; y < g.out_h; ++y) {
      float* row = p + y * g.wp;
      copy_floats(src + (c * g.out_h + y) * g.out_w, g.out_w, row);
      zero_floats(row + g.out_w, g.wp - g.out_w);
    }
    zero_floats(p + g.out_h * g.wp, count - g.out_h * g.wp);
  }
}

namespace {

// Channels per partial sum of a tile: each run of this many channels sums into fresh registers,
// and the runs' sums are added in memory, in order. One chain through every channel and tap
// (9 x 256 terms on the widest layer) rounded like a long sequential sum: backward-data's error
// was 2.0-2.8x PyTorch float32's on 64 to 256 channels (bench/results/conv_fidelity_*.md); with
// runs of 16 channels (144 terms) the chains are short and the runs few. Costs one load and store
// of the tile per run against 144 multiply-adds per accumulator.
constexpr int64_t kChannelsPerSum = 16;

// out[r][j] = sum over c < channels, t < Taps of wt[(c * Taps + t) * kRows + r] * in[c * plane + off[t] + j]
// for r < kRows, j < Vecs * kLanes (out's rows are kCols apart); `in` points at the tile's first
// output position. Summed in runs of kChannelsPerSum channels.
template <int Taps, int Vecs>
inline void forward_tile(const float* __restrict wt, int64_t channels, const float* __restrict in, int64_t plane,
                         const int64_t* off, float* __restrict out) {
  for (int64_t c0 = 0; c0 < channels; c0 += kChannelsPerSum) {
    V acc[kRows][Vecs];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < Vecs; ++v) acc[r][v] = V{};
    const int64_t c_end = std::min(channels, c0 + kChannelsPerSum);
    for (int64_t c = c0; c < c_end; ++c) {
      const float* base = in + c * plane;
      const float* wc = wt + c * Taps * kRows;
#pragma GCC unroll 9
      for (int t = 0; t < Taps; ++t) {
        const float* src = base + off[t];
        V b[Vecs];
#pragma GCC unroll 3
        for (int v = 0; v < Vecs; ++v) b[v] = load(src + v * kLanes);
#pragma GCC unroll 8
        for (int r = 0; r < kRows; ++r) {
          const V a = wc[t * kRows + r] - V{};  // a broadcast (x - 0 is exactly x)
#pragma GCC unroll 3
          for (int v = 0; v < Vecs; ++v) acc[r][v] += a * b[v];
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < Vecs; ++v) {
        float* o = out + r * kCols + v * kLanes;
        store(o, c0 == 0 ? acc[r][v] : load(o) + acc[r][v]);
      }
  }
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// forward_tile<Taps, 1> for AVX2's sixteen 8-float registers: the 6 rows' 16-lane accumulators as
// 12 halves, 2 of the input and a broadcast: 15 registers. Written with the vector type, GCC
// spilled some of them on every multiply-add (perf on the narrow network's step, 2026-11-28: 45% of
// the step in this tile at about 25 of the core's 92 GFLOP/s). Each position sums the same products
// in the same order, one multiply-add each, runs of kChannelsPerSum added in memory: the same bits.
template <int Taps>
inline void forward_tile_avx2(const float* __restrict wt, int64_t channels, const float* __restrict in, int64_t plane,
                              const int64_t* off, float* __restrict out) {
  static_assert(kRows == 6 && kCols == 16, "the AVX2 tile is 6 rows of 16 positions");
  for (int64_t c0 = 0; c0 < channels; c0 += kChannelsPerSum) {
    __m256 lo[kRows], hi[kRows];
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
    const int64_t c_end = std::min(channels, c0 + kChannelsPerSum);
    for (int64_t c = c0; c < c_end; ++c) {
      const float* base = in + c * plane;
      const float* wc = wt + c * Taps * kRows;
#pragma GCC unroll 9
      for (int t = 0; t < Taps; ++t) {
        const __m256 b_lo = _mm256_loadu_ps(base + off[t]), b_hi = _mm256_loadu_ps(base + off[t] + 8);
#pragma GCC unroll 6
        for (int r = 0; r < kRows; ++r) {
          const __m256 a = _mm256_broadcast_ss(wc + t * kRows + r);
          lo[r] = _mm256_fmadd_ps(a, b_lo, lo[r]);
          hi[r] = _mm256_fmadd_ps(a, b_hi, hi[r]);
        }
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) {
      float* o = out + r * kCols;
      _mm256_storeu_ps(o, c0 == 0 ? lo[r] : _mm256_add_ps(_mm256_loadu_ps(o), lo[r]));
      _mm256_storeu_ps(o + 8, c0 == 0 ? hi[r] : _mm256_add_ps(_mm256_loadu_ps(o + 8), hi[r]));
    }
  }
}
#endif

// dst[x] = src[x] + b for x < n (n <= out_w): one output row's stretch of a tile. With AVX-512,
// masked vector stores (a scalar loop here costs an estimated 5-10% of a 16-channel tile); with
// AVX2, 8 at a time and the rest one by one.
inline void add_bias_row(const float* src, int64_t n, float b, float* dst) {
#if defined(__AVX512F__)
  const __m512 bias = _mm512_set1_ps(b);
  for (int64_t x = 0; x < n; x += kLanes) {
    const __mmask16 m = n - x >= kLanes ? __mmask16(0xffff) : __mmask16((1u << (n - x)) - 1);
    _mm512_mask_storeu_ps(dst + x, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + x), bias));
  }
#elif defined(__AVX2__)
  const __m256 bias = _mm256_set1_ps(b);
  int64_t x = 0;
  for (; x + 8 <= n; x += 8) _mm256_storeu_ps(dst + x, _mm256_add_ps(_mm256_loadu_ps(src + x), bias));
  for (; x < n; ++x) dst[x] = src[x] + b;
#else
  for (int64_t x = 0; x < n; ++x) dst[x] = src[x] + b;
#endif
}

// Copies the valid positions of a forward tile (rows < `rows`, positions q0 .. q0 + cols) into
// the NCHW output planes of one image, adding the bias.
void store_tile(const float* tile, int rows, int64_t q0, int64_t cols, const Geometry& g, float* out,
                const float* bias) {
  const int64_t hw = g.out_h * g.out_w;
  const int64_t y_end = std::min(g.out_h, (q0 + cols + g.wp - 1) / g.wp);
  for (int r = 0; r < rows; ++r) {
    const float b = bias ? bias[r] : 0.f;
    for (int64_t y = q0 / g.wp; y < y_end; ++y) {
      const int64_t lo = std::max<int64_t>(0, q0 - y * g.wp), hi = std::min(g.out_w, q0 + cols - y * g.wp);
      if (hi > lo) add_bias_row(tile + r * kCols + y * g.wp - q0 + lo, hi - lo, b, out + r * hw + y * g.out_w + lo);
    }
  }
}

// One forward tile of up to kVecs vectors of positions (fewer for an image's last tile).
template <int Taps>
void forward_tile_of(int vecs, const float* wt, int64_t channels, const float* in, int64_t plane, const int64_t* off,
                     float* out) {
  if (vecs == 3) forward_tile<Taps, 3>(wt, channels, in, plane, off, out);
  if (vecs == 2) forward_tile<Taps, 2>(wt, channels, in, plane, off, out);
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  if (vecs == 1) return forward_tile_avx2<Taps>(wt, channels, in, plane, off, out);
#endif
  if (vecs == 1) forward_tile<Taps, 1>(wt, channels, in, plane, off, out);
}

}  // namespace

void any_forward_tile(int taps, int vecs, const float* wt, int64_t channels, const float* in, int64_t plane,
                      const int64_t* off, float* out) {
  switch (taps) {
    case 9: return forward_tile_of<9>(vecs, wt, channels, in, plane, off, out);
    case 4: return forward_tile_of<4>(vecs, wt, channels, in, plane, off, out);
    case 2: return forward_tile_of<2>(vecs, wt, channels, in, plane, off, out);
    case 1: return forward_tile_of<1>(vecs, wt, channels, in, plane, off, out);
    default: std::fill(out, out + kRows * kCols, 0.f);
  }
}

// The packed filters wt are [ceil(c_out / 8)][c_in][taps][8], zero rows past c_out. One image per
// unit of parallel work, handed out dynamically: an image's result does not depend on the thread
// that computes it, and a thread descheduled by another process no longer holds up a fixed half.
void run_forward(int64_t n, int64_t c_in, int64_t c_out, const Geometry& g, const float* in, const float* wt,
                 const float* bias, float* out) {
  const int64_t tiles = (c_out + kRows - 1) / kRows, out_hw = g.out_h * g.out_w;
#pragma omp parallel for schedule(dynamic, 2) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    float* planes = scratch(0, size_t(c_in * g.plane));
    pad_planes(in + i * c_in * g.h * g.w, c_in, g, planes);
    alignas(64) float tile[kRows * kCols];
    float* out_image = out + i * c_out * out_hw;
    for (int64_t q0 = 0; q0 < g.positions; q0 += kCols) {
      const int64_t cols = std::min<int64_t>(kCols, g.positions - q0);  // a multiple of kLanes
      for (int64_t ct = 0; ct < tiles; ++ct) {
        const float* wct = wt + ct * c_in * g.taps * kRows;
        any_forward_tile(g.taps, int(cols / kLanes), wct, c_in, planes + q0, g.plane, g.off, tile);
        const int rows = int(std::min<int64_t>(kRows, c_out - ct * kRows));
        store_tile(tile, rows, q0, cols, g, out_image + ct * kRows * out_hw, bias ? bias + ct * kRows : nullptr);
      }
    }
  }
}

}  // namespace direct

using namespace direct;

bool direct_conv_supports(const Conv2dShape& s) {
  if (s.kh != s.kw || (s.stride != 1 && s.stride != 2)) return false;
  return (s.kh == 3 && s.pad == 1) || (s.kh == 1 && s.pad == 0);
}

void direct_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y) {
  const Geometry g = geometry(s);
  const std::vector<float> wt =
      pack_filters(s.c_out, s.c_in, g.taps, [&](int64_t o, int64_t c, int t) { return w[(o * s.c_in + c) * g.taps + t]; });
  run_forward(s.n, s.c_in, s.c_out, g, x, wt.data(), bias, y);
}

// Stride 1: a forward convolution of dy (same size as x, same padding) with the filters rotated.
// Stride 2: strided_backward_data's four phases.
void direct_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  if (s.stride == 2) return strided_backward_data(s, dy, w, dx);
  const Conv2dShape swapped{s.n, s.c_out, s.h, s.w, s.c_in, s.kh, s.kw, 1, s.pad};
  const Geometry g = geometry(swapped);
  const int taps = g.taps;
  const std::vector<float> wt = pack_filters(
      s.c_in, s.c_out, taps, [&](int64_t o, int64_t c, int t) { return w[(c * s.c_in + o) * taps + (taps - 1 - t)]; });
  run_forward(s.n, s.c_out, s.c_in, g, dy, wt.data(), nullptr, dx);
}

}  // namespace cg::kernels::cpu
