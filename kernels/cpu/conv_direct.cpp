// The direct convolution behind conv_direct.h. Work per image: copy its channels into
// zero-bordered planes, then register tiles read the planes in place at the taps' offsets.
// Stride 2 splits each channel into its four phases (even/odd rows x even/odd columns), each a
// plane of its own, so every tap is again a plain offset into one of them. Output positions whose
// column falls past the output row (the planes' rows are a little longer), or past the last row,
// are computed and thrown away: the price of reading straight from the planes. For stride 1 and
// padding 1 a row is one column longer than the image (a row's right border is the next row's
// left border), and the last tile of an image is only as many vectors wide as it needs: 4% more
// positions than outputs at 28x28, 14% at 14x14.
#include "kernels/cpu/conv_direct.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "kernels/cpu/float_rows.h"

namespace cg::kernels::cpu {
namespace {

// 16 floats, one AVX-512 register (GCC/Clang vector extension); aligned(4): loads may be unaligned.
using V __attribute__((vector_size(64), aligned(4), may_alias)) = float;
constexpr int kLanes = 16;
constexpr int kMaxTaps = 9;
constexpr int kRows = 8;                // output channels per forward tile (one broadcast each)
constexpr int kVecs = 3;                // vectors of positions per forward tile: 8 x 3 accumulators
constexpr int kCols = kVecs * kLanes;   // 48 positions per forward tile
constexpr int kFilterRows = 3;          // output channels per backward-filter tile: 3 x 9 accumulators
constexpr int64_t kFilterSlots = 8;     // backward-filter's fixed units of parallel work
constexpr int64_t kFilterGroupFloats = 128 * 1024;  // backward-filter: images prepared at once, in floats

inline V load(const float* p) { return *reinterpret_cast<const V*>(p); }
inline void store(float* p, V v) { *reinterpret_cast<V*>(p) = v; }
int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Where things sit in the planes of one image. Phase (a, b) of a channel (a, b < stride) is the
// plane P[r][s] = x[stride * (r - 1) + a][stride * (s - 1) + b] (zero outside the image), rows
// `wp` long; output position q = y * wp + x (x < out_w) reads tap t at q + off[t] of its channel.
struct Geometry {
  int64_t h, w, out_h, out_w, stride;
  int64_t wp;          // row length of the planes (>= out_w): the output's row pitch too
  int64_t rows;        // rows of a phase plane that valid outputs read
  int64_t positions;   // output positions computed per image: out_h * wp rounded up to a vector
  int64_t phase_plane; // floats per phase plane, slack included (every computed load stays inside)
  int64_t plane;       // floats per channel: stride * stride phase planes
  int taps;
  int64_t off[kMaxTaps];
};

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

// Per-thread scratch, reused across calls so steady-state training allocates nothing here.
float* scratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[2];
  auto& b = buffers[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// dst[c] (c < channels, each g.plane floats) = the phase planes of src's [h][w] plane c. Each
// float is written once.
void pad_planes(const float* src, int64_t channels, const Geometry& g, float* dst) {
  const int64_t st = g.stride;
  for (int64_t c = 0; c < channels; ++c) {
    const float* image = src + c * g.h * g.w;
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

// dst[c] (c < channels, each `count` floats) = src's [out_h][out_w] plane c in rows wp long:
// pixel (y, x) at y * wp + x, zeros in the columns past out_w and after the last row.
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

// out[r][j] = sum over c < channels, t < Taps of wt[(c * Taps + t) * kRows + r] * in[c * plane + off[t] + j]
// for r < kRows, j < Vecs * kLanes (out's rows are kCols apart); `in` points at the tile's first
// output position.
template <int Taps, int Vecs>
inline void forward_tile(const float* __restrict wt, int64_t channels, const float* __restrict in, int64_t plane,
                         const int64_t* off, float* __restrict out) {
  V acc[kRows][Vecs];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < Vecs; ++v) acc[r][v] = V{};
  for (int64_t c = 0; c < channels; ++c) {
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
    for (int v = 0; v < Vecs; ++v) store(out + r * kCols + v * kLanes, acc[r][v]);
}

// dst[x] = src[x] + b for x < n (n <= out_w): one output row's stretch of a tile. With AVX-512,
// masked vector stores (a scalar loop here costs an estimated 5-10% of a 16-channel tile).
inline void add_bias_row(const float* src, int64_t n, float b, float* dst) {
#if defined(__AVX512F__)
  const __m512 bias = _mm512_set1_ps(b);
  for (int64_t x = 0; x < n; x += kLanes) {
    const __mmask16 m = n - x >= kLanes ? __mmask16(0xffff) : __mmask16((1u << (n - x)) - 1);
    _mm512_mask_storeu_ps(dst + x, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + x), bias));
  }
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
  if (vecs == 1) forward_tile<Taps, 1>(wt, channels, in, plane, off, out);
}

// forward_tile_of for the tap counts the kernels use: 9 and 1 (3x3 and 1x1 layers), 2 and 4 (the
// phases of a stride-2 backward-data). No taps: the tile is zero.
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

// out[n, c_out, out_h, out_w] = the convolution of in[n, c_in, h, w] (geometry g) with the packed
// filters wt ([ceil(c_out / 8)][c_in][taps][8], zero rows past c_out), plus bias. One image per
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

// Packs filters for run_forward: wt[tile][c][t][r] = filter(tile * 8 + r, c, t), zero past `outs`.
// filter(o, c, t) reads w[o][c][t] (forward) or, for backward-data, w[c][o][8 - t] (rotated,
// input and output channels swapped).
template <typename Filter>
std::vector<float> pack_filters(int64_t outs, int64_t ins, int taps, Filter filter) {
  const int64_t tiles = (outs + kRows - 1) / kRows;
  std::vector<float> wt(size_t(tiles * ins * taps * kRows), 0.f);
  for (int64_t o = 0; o < outs; ++o)
    for (int64_t c = 0; c < ins; ++c)
      for (int t = 0; t < taps; ++t)
        wt[size_t(((o / kRows * ins + c) * taps + t) * kRows + o % kRows)] = filter(o, c, t);
  return wt;
}

// Stride-2 backward-data. dx's four phases (rows 2Y + a, columns 2X + b) are each a stride-1
// correlation of dy with the filter taps that land on them: input row 2y - pad + ky has phase a
// when ky = a + pad (mod 2), and then dx row 2Y + a takes dy row Y + (a + pad - ky) / 2, which is
// row Y or Y + 1 for the layers supported (3x3: phase 0 takes ky = 1 from row Y; phase 1 takes
// ky = 2 from row Y and ky = 0 from row Y + 1. 1x1: phase 0 takes ky = 0; phase 1 nothing, so
// zeros). Columns alike. The four phases have 1, 2, 2 and 4 taps, nine in all: no multiply is
// spent on a zero, unlike a dilated dy under the rotated filter (four times the work) or
// im2col's GEMM followed by col2im's strided scatter.
struct AxisTaps {
  int count = 0;
  int64_t k[2] = {}, shift[2] = {};  // the kernel rows (columns) and the dy row (column) offsets, 0 or 1
};

AxisTaps axis_taps(int64_t kernel, int64_t pad, int64_t a) {
  AxisTaps t;
  for (int64_t k = 0; k < kernel; ++k) {
    if ((a + pad - k) % 2 != 0) continue;
    t.k[t.count] = k;
    t.shift[t.count] = (a + pad - k) / 2;
    ++t.count;
  }
  return t;
}

// dy's planes for it: zero-bordered like a stride-1 input (top row and left column), rows one
// longer than dy's (the zero past a row is the next row's left border) and a zero row below, so
// tap (row Y + 1, column X + 1) of the last row and column reads zeros. dx's phase position
// q = Y * wp + X reads tap (i, j) at q + off: off = (i + 1) * wp + j + 1.
Geometry gradient_geometry(const Conv2dShape& s) {
  Geometry g{s.out_h(), s.out_w(), s.out_h(), s.out_w(), 1, 0, 0, 0, 0, 0, 0, {}};
  g.wp = g.out_w + 1;
  g.rows = g.out_h + 2;
  g.positions = round_up(g.out_h * g.wp, kLanes);
  g.phase_plane = round_up(std::max(g.rows * g.wp, g.positions + 2 * g.wp + 2) + kLanes, kLanes);
  g.plane = g.phase_plane;
  return g;
}

// dst[2k] = even[k] and dst[2k + 1] = odd[k], for indexes below n: one dx row's stretch from the
// tiles of phases (a, 0) and (a, 1). Reads up to 16 floats past the last one used (tile slack).
inline void interleave(const float* even, const float* odd, int64_t n, float* dst) {
#if defined(__AVX512F__)
  const __m512i low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int64_t j = 0; j < n; j += 2 * kLanes) {
    const __m512 e = _mm512_loadu_ps(even + j / 2), o = _mm512_loadu_ps(odd + j / 2);
    _mm512_mask_storeu_ps(dst + j, lanes_below(n - j), _mm512_permutex2var_ps(e, low, o));
    _mm512_mask_storeu_ps(dst + j + kLanes, lanes_below(n - j - kLanes), _mm512_permutex2var_ps(e, high, o));
  }
#else
  for (int64_t j = 0; j < n; ++j) dst[j] = (j % 2 ? odd : even)[j / 2];
#endif
}

// Writes the dx rows 2Y + a (Y < phase_rows) that a pair of tiles covers (positions q0 .. q0 +
// cols, `rows` channels): phase (a, 0) into the even columns, (a, 1) into the odd ones.
void store_phase_pair(const float* even, const float* odd, int rows, int64_t q0, int64_t cols, int64_t a,
                      int64_t phase_rows, const Geometry& g, int64_t h, int64_t w, float* out) {
  const int64_t y_end = std::min(phase_rows, (q0 + cols + g.wp - 1) / g.wp);
  for (int r = 0; r < rows; ++r)
    for (int64_t y = q0 / g.wp; y < y_end; ++y) {
      const int64_t lo = std::max<int64_t>(0, q0 - y * g.wp), hi = std::min(g.out_w, q0 + cols - y * g.wp);
      if (hi <= lo) continue;
      const int64_t at = r * kCols + y * g.wp - q0 + lo;
      interleave(even + at, odd + at, std::min(2 * hi, w) - 2 * lo, out + (r * h + 2 * y + a) * w + 2 * lo);
    }
}

void strided_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  const Geometry g = gradient_geometry(s);
  const int64_t taps = s.kh * s.kw, hw = s.h * s.w, out_hw = g.out_h * g.out_w;
  const int64_t tiles = (s.c_in + kRows - 1) / kRows;
  struct Phase {
    int taps = 0;
    int64_t off[4] = {};
    std::vector<float> wt;  // pack_filters' layout, for outputs dx's channels and inputs dy's
  } phases[2][2];
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 2; ++b) {
      const AxisTaps ty = axis_taps(s.kh, s.pad, a), tx = axis_taps(s.kw, s.pad, b);
      Phase& p = phases[a][b];
      p.taps = ty.count * tx.count;
      for (int i = 0; i < ty.count; ++i)
        for (int j = 0; j < tx.count; ++j) p.off[i * tx.count + j] = (ty.shift[i] + 1) * g.wp + tx.shift[j] + 1;
      p.wt = pack_filters(s.c_in, s.c_out, p.taps, [&](int64_t o, int64_t c, int t) {
        return w[(c * s.c_in + o) * taps + ty.k[t / tx.count] * s.kw + tx.k[t % tx.count]];
      });
    }
#pragma omp parallel for schedule(dynamic, 2) if (s.n > 1)
  for (int64_t i = 0; i < s.n; ++i) {
    float* planes = scratch(0, size_t(s.c_out * g.plane));
    pad_planes(dy + i * s.c_out * out_hw, s.c_out, g, planes);
    alignas(64) float tile[2][kRows * kCols + kLanes];  // phases (a, 0) and (a, 1); slack for interleave
    float* image = dx + i * s.c_in * hw;
    for (int64_t a = 0; a < 2; ++a) {
      const int64_t phase_rows = (s.h - a + 1) / 2, end = round_up(phase_rows * g.wp, kLanes);
      for (int64_t q0 = 0; q0 < end; q0 += kCols) {
        const int64_t cols = std::min<int64_t>(kCols, end - q0);
        for (int64_t ct = 0; ct < tiles; ++ct) {
          for (int b = 0; b < 2; ++b) {
            const Phase& p = phases[a][b];
            const float* wct = p.taps ? p.wt.data() + ct * s.c_out * p.taps * kRows : nullptr;
            any_forward_tile(p.taps, int(cols / kLanes), wct, s.c_out, planes + q0, g.plane, p.off, tile[b]);
          }
          const int rows = int(std::min<int64_t>(kRows, s.c_in - ct * kRows));
          store_phase_pair(tile[0], tile[1], rows, q0, cols, a, phase_rows, g, s.h, s.w, image + ct * kRows * hw);
        }
      }
    }
  }
}

// The images of one backward-filter call: `count` positions each, x's planes `x_image` floats
// apart and dy's rows `dy_image` floats apart from one image to the next.
struct FilterImages {
  int64_t images, count, x_image, dy_image;
};

// acc[r][t] (+)= sum over images and positions q < count of dy[r][q] * x[q + off[t]] (t < Taps),
// lane by lane, images in order, for R rows of dy `dy_stride` apart; acc rows are `acc_stride`
// vectors apart. `first`: acc starts at zero.
template <int R, int Taps>
inline void filter_tile(const float* __restrict dy, int64_t dy_stride, const float* __restrict x, const int64_t* off,
                        const FilterImages& im, V* acc, int64_t acc_stride, bool first) {
  V a[R][Taps];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 9
    for (int t = 0; t < Taps; ++t) a[r][t] = first ? V{} : acc[r * acc_stride + t];
  for (int64_t i = 0; i < im.images; ++i) {
    const float* dyi = dy + i * im.dy_image;
    const float* xi = x + i * im.x_image;
    for (int64_t q = 0; q < im.count; q += kLanes) {
      V d[R];
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) d[r] = load(dyi + r * dy_stride + q);
#pragma GCC unroll 9
      for (int t = 0; t < Taps; ++t) {
        V xv = load(xi + q + off[t]);
        // Keep the load in a register: GCC otherwise folds it into each of the R multiply-adds,
        // loading the same (mostly cache-line-splitting) vector R times, which made this load-bound.
        asm("" : "+v"(xv));
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) a[r][t] += d[r] * xv;
      }
    }
  }
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 9
    for (int t = 0; t < Taps; ++t) acc[r * acc_stride + t] = a[r][t];
}

#if defined(__AVX512F__)
// Lanes [0, 16) of the result: the sums of a's and b's halves (`half` lanes wide) side by side, a's
// first. Applied with half = 8, 4, 2, 1 it turns 16 vectors into the vector of their lane sums.
// Output block j (Half lanes) adds the two halves of input block j (2 * Half lanes) of a, or of b
// for the second half of the blocks: lane l takes index `low` and index `low` + Half.
template <int Half>
constexpr std::array<int, kLanes> fold_index(int shift) {
  std::array<int, kLanes> index{};
  constexpr int blocks_per_input = kLanes / (2 * Half);
  for (int l = 0; l < kLanes; ++l) {
    const int block = l / Half, source = block < blocks_per_input ? 0 : kLanes;
    index[l] = source + (block % blocks_per_input) * 2 * Half + l % Half + shift;
  }
  return index;
}

template <int Half>
inline __m512 fold_pair(__m512 a, __m512 b) {
  static constexpr std::array<int, kLanes> low = fold_index<Half>(0), high = fold_index<Half>(Half);
  const __m512i lo = _mm512_loadu_si512(low.data()), hi = _mm512_loadu_si512(high.data());
  return _mm512_add_ps(_mm512_permutex2var_ps(a, lo, b), _mm512_permutex2var_ps(a, hi, b));
}
#endif

// out[e] = the sum of acc[e]'s 16 lanes, e < n. With AVX-512, blocks of 16 vectors fold pairwise
// into one vector of 16 sums (a fixed tree, 45 operations instead of 256 scalar additions).
void lane_sums(const V* acc, int64_t n, float* out) {
  int64_t e = 0;
#if defined(__AVX512F__)
  for (; e + kLanes <= n; e += kLanes) {
    __m512 v[kLanes];
    for (int l = 0; l < kLanes; ++l) v[l] = __m512(acc[e + l]);
    for (int l = 0; l < 8; ++l) v[l] = fold_pair<8>(v[2 * l], v[2 * l + 1]);
    for (int l = 0; l < 4; ++l) v[l] = fold_pair<4>(v[2 * l], v[2 * l + 1]);
    for (int l = 0; l < 2; ++l) v[l] = fold_pair<2>(v[2 * l], v[2 * l + 1]);
    _mm512_storeu_ps(out + e, fold_pair<1>(v[0], v[1]));
  }
#endif
  for (; e < n; ++e) {
    float total = 0.f;
    for (int l = 0; l < kLanes; ++l) total += acc[e][l];
    out[e] = total;
  }
}

}  // namespace

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

// Each slot of images sums its products lane by lane into vector accumulators ([c_out][c_in][taps]
// vectors, in its thread's cache), then adds each vector's 16 lanes in lane order into its own row of
// sums; the slots' rows are added in slot order.
void direct_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  const Geometry g = geometry(s);
  const int taps = g.taps;
  const int64_t hw = s.h * s.w, out_hw = g.out_h * g.out_w;
  const int64_t count = round_up(g.out_h * g.wp, kLanes);  // positions holding gradient
  const int64_t per_slot = (s.n + kFilterSlots - 1) / kFilterSlots, slots = (s.n + per_slot - 1) / per_slot;
  const int64_t vectors = s.c_out * s.c_in * taps;
  // One row of sums per slot: 16 times smaller than the vector accumulators, so adding the slots
  // (written by different cores) moves little between caches. Kept by the calling thread between
  // calls, like every buffer here, so steady-state training allocates nothing; each slot writes
  // its whole row.
  thread_local std::vector<float> slot_rows;
  if (slot_rows.size() < size_t(slots * vectors)) slot_rows.resize(size_t(slots * vectors));
  float* slot_sums = slot_rows.data();
  // Images prepared together (planes, gradient rows), then walked in one go by every (output,
  // input channel) pair: the accumulators are loaded and stored once per group instead of once per
  // image, which matters for small planes (7x7 is 4 vectors of positions). The group stays within
  // about half of a 1 MB L2 cache. The lanes' sums run in the same order for any group size.
  const int64_t image_floats = s.c_in * g.plane + s.c_out * count;
  const int64_t group = std::clamp<int64_t>(kFilterGroupFloats / image_floats, 1, per_slot);
#pragma omp parallel for schedule(dynamic, 1) if (slots > 1)  // a slot's sums do not depend on its thread
  for (int64_t slot = 0; slot < slots; ++slot) {
    float* planes = scratch(0, size_t(group * s.c_in * g.plane));
    float* grads = scratch(1, size_t(group * s.c_out * count));  // dy in rows wp long, zeros past each row's w
    // The accumulators (up to megabytes) live on in each thread between calls, so steady-state
    // training neither allocates nor page-faults them; a slot's first image overwrites them.
    thread_local std::vector<float> acc_lanes;
    if (acc_lanes.size() < size_t(vectors * kLanes)) acc_lanes.resize(size_t(vectors * kLanes));
    V* acc = reinterpret_cast<V*>(acc_lanes.data());
    const int64_t begin = slot * per_slot, end = std::min(s.n, (slot + 1) * per_slot);
    for (int64_t i0 = begin; i0 < end; i0 += group) {
      const FilterImages im{std::min(group, end - i0), count, s.c_in * g.plane, s.c_out * count};
      for (int64_t j = 0; j < im.images; ++j) {
        pad_planes(x + (i0 + j) * s.c_in * hw, s.c_in, g, planes + j * im.x_image);
        widen_rows(dy + (i0 + j) * s.c_out * out_hw, s.c_out, g, count, grads + j * im.dy_image);
      }
      const bool first = i0 == begin;
      for (int64_t o = 0; o < s.c_out; o += kFilterRows) {
        const int64_t rows = std::min<int64_t>(kFilterRows, s.c_out - o);
        for (int64_t c = 0; c < s.c_in; ++c) {
          V* a = acc + (o * s.c_in + c) * taps;
          const float* d = grads + o * count;
          const float* xc = planes + c * g.plane;
          const int64_t as = s.c_in * taps;
          if (taps == 1) {
            // One tap: one accumulator per row, so take up to 3 rows at a time like the others.
            for (int64_t r = 0; r < rows; ++r) filter_tile<1, 1>(d + r * count, count, xc, g.off, im, a + r * as, as, first);
          } else if (rows == kFilterRows) {
            filter_tile<kFilterRows, 9>(d, count, xc, g.off, im, a, as, first);
          } else if (rows == 2) {
            filter_tile<2, 9>(d, count, xc, g.off, im, a, as, first);
          } else {
            filter_tile<1, 9>(d, count, xc, g.off, im, a, as, first);
          }
        }
      }
    }
    lane_sums(acc, vectors, slot_sums + slot * vectors);
  }
  for (int64_t e = 0; e < vectors; ++e) {
    float total = slot_sums[e];
    for (int64_t slot = 1; slot < slots; ++slot) total += slot_sums[slot * vectors + e];
    dw[e] = total;
  }
  if (db) {
    for (int64_t o = 0; o < s.c_out; ++o) {
      float total = 0.f;
      for (int64_t i = 0; i < s.n; ++i) {
        const float* d = dy + (i * s.c_out + o) * out_hw;
        for (int64_t p = 0; p < out_hw; ++p) total += d[p];
      }
      db[o] = total;
    }
  }
}

}  // namespace cg::kernels::cpu
