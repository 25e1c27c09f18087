// Stride-2 backward-data of the direct convolution (kernels/cpu_conv/conv_direct.h), over the forward
// tiles of conv_direct.cpp.
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <vector>

#include "kernels/cpu_conv/conv_direct_planes.h"
#include "kernels/cpu_conv/float_rows.h"

namespace cg::kernels::cpu::direct {
namespace {

// dx's four phases (rows 2Y + a, columns 2X + b) are each a stride-1
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
  // Two stores a pair, not dst[j] = (j % 2 ? odd : even)[j / 2]: that select of two pointers, built
  // by GCC 12 at -O1 under AddressSanitizer (scripts/sanitize.sh asan) on a machine without
  // AVX-512, read from wild addresses (wrong dx, then SEGV), in every stride-2 layer's backward.
  for (int64_t k = 0; 2 * k < n; ++k) {
    dst[2 * k] = even[k];
    if (2 * k + 1 < n) dst[2 * k + 1] = odd[k];
  }
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

}  // namespace

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

}  // namespace cg::kernels::cpu::direct
