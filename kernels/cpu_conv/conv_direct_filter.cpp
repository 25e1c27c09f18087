// Backward-filter of the direct convolution (kernels/cpu_conv/conv_direct.h): the filter gradient
// summed lane by lane in vector accumulators over groups of images, reading the same zero-bordered
// planes as the forward tiles (conv_direct_planes.h).
#include "kernels/cpu_conv/conv_direct.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <vector>
#include <array>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu_conv/conv_direct_planes.h"
#include "kernels/cpu_conv/scratch.h"

namespace cg::kernels::cpu {
namespace {

using namespace direct;

constexpr int kFilterRows = 3;          // output channels per backward-filter tile: 3 x 9 accumulators
constexpr int64_t kFilterSlots = 8;     // backward-filter's fixed units of parallel work
constexpr int64_t kFilterGroupFloats = 128 * 1024;  // backward-filter: images prepared at once, in floats

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
#if defined(__AVX512F__)
        // Keep the load in a register: GCC otherwise folds it into each of the R multiply-adds,
        // loading the same (mostly cache-line-splitting) vector R times, which made this load-bound.
        // Only where a 64-byte vector fits one register: without AVX-512 it is two, and "+v" is an
        // impossible constraint (the build failed on AVX2-only machines).
        asm("" : "+v"(xv));
#endif
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

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// filter_tile for one row of dy and Taps <= 5 taps, written for AVX2's sixteen 8-float registers: a
// 16-lane accumulator is two of them, so filter_tile's 3 x 9 accumulators (54 registers) spilled on
// every multiply-add (perf on the narrow network's layer1, 2026-11-28: stack loads and stores
// around each one; 4-6 GFLOP/s against a 91 GFLOP/s core). Here 10 accumulator halves, 2 of dy
// and 2 of x fit. Each lane adds the same products in the same order as filter_tile (a
// multiply-add per term, images in order), so the sums are the same bits.
template <int Taps>
inline void filter_row_avx2(const float* __restrict dy, const float* __restrict x, const int64_t* off,
                            const FilterImages& im, V* acc, bool first) {
  float* out = reinterpret_cast<float*>(acc);
  __m256 lo[Taps], hi[Taps];
  for (int t = 0; t < Taps; ++t) {
    lo[t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out + t * kLanes);
    hi[t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out + t * kLanes + 8);
  }
  for (int64_t i = 0; i < im.images; ++i) {
    const float* dyi = dy + i * im.dy_image;
    const float* xi = x + i * im.x_image;
    for (int64_t q = 0; q < im.count; q += kLanes) {
      const __m256 d_lo = _mm256_loadu_ps(dyi + q), d_hi = _mm256_loadu_ps(dyi + q + 8);
#pragma GCC unroll 5
      for (int t = 0; t < Taps; ++t) {
        lo[t] = _mm256_fmadd_ps(d_lo, _mm256_loadu_ps(xi + q + off[t]), lo[t]);
        hi[t] = _mm256_fmadd_ps(d_hi, _mm256_loadu_ps(xi + q + off[t] + 8), hi[t]);
      }
    }
  }
  for (int t = 0; t < Taps; ++t) {
    _mm256_storeu_ps(out + t * kLanes, lo[t]);
    _mm256_storeu_ps(out + t * kLanes + 8, hi[t]);
  }
}

#endif

// filter_tile<rows, 9> for up to kFilterRows rows; on AVX2 each row alone, its 9 taps in passes of
// 5 and 4 (filter_row_avx2).
void filter_rows_9(int64_t rows, const float* dy, int64_t dy_stride, const float* x, const int64_t* off,
                   const FilterImages& im, V* acc, int64_t acc_stride, bool first) {
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  for (int64_t r = 0; r < rows; ++r) {
    filter_row_avx2<5>(dy + r * dy_stride, x, off, im, acc + r * acc_stride, first);
    filter_row_avx2<4>(dy + r * dy_stride, x, off + 5, im, acc + r * acc_stride + 5, first);
  }
#else
  if (rows == kFilterRows) filter_tile<kFilterRows, 9>(dy, dy_stride, x, off, im, acc, acc_stride, first);
  else if (rows == 2) filter_tile<2, 9>(dy, dy_stride, x, off, im, acc, acc_stride, first);
  else filter_tile<1, 9>(dy, dy_stride, x, off, im, acc, acc_stride, first);
#endif
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

// The sum of v's 16 lanes in the order of fold_pair's tree: lanes 8 apart added, then 4, 2, 1.
inline float tree_sum(const V& v) {
  float s[kLanes];
  for (int l = 0; l < kLanes; ++l) s[l] = v[l];
  for (int half = kLanes / 2; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) s[l] += s[l + half];
  return s[0];
}

// out[e] = the sum of acc[e]'s 16 lanes, e < n, as a halving tree (tree_sum). With AVX-512,
// blocks of 16 vectors fold pairwise into one vector of 16 sums (45 operations instead of 256
// scalar additions); the rest, and every vector without AVX-512, one at a time in the same
// order. Lane by lane from the left, as the rest once was, an AVX2 build gave other bits than an
// AVX-512 one, and an accumulator past the last block of 16 other bits than inside one.
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
  for (; e < n; ++e) out[e] = tree_sum(acc[e]);
}

// Prepares `images` images from image i0 on: x's planes zero-bordered into `planes`, dy's rows
// widened into `grads` (rows wp long, zeros past each row's w).
void prepare_images(const Conv2dShape& s, const Geometry& g, const float* x, const float* dy, int64_t i0,
                    const FilterImages& im, float* planes, float* grads) {
  const int64_t hw = s.h * s.w, out_hw = g.out_h * g.out_w;
  for (int64_t j = 0; j < im.images; ++j) {
    pad_planes(x + (i0 + j) * s.c_in * hw, s.c_in, g, planes + j * im.x_image);
    widen_rows(dy + (i0 + j) * s.c_out * out_hw, s.c_out, g, im.count, grads + j * im.dy_image);
  }
}

// Adds one group of prepared images to every (output, input channel) pair's accumulators, up to
// kFilterRows output channels per tile. `first`: the accumulators start at zero.
void accumulate_group(const Conv2dShape& s, const Geometry& g, const FilterImages& im, const float* planes,
                      const float* grads, V* acc, bool first) {
  const int taps = g.taps;
  const int64_t count = im.count;
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
      } else {
        filter_rows_9(rows, d, count, xc, g.off, im, a, as, first);
      }
    }
  }
}

// The calling thread's vector accumulators, `vectors` long. They (up to megabytes) live on in each
// thread between calls, so steady-state training neither allocates nor page-faults them; a slot's
// first image overwrites them.
V* thread_accumulators(int64_t vectors) {
  // A std::vector, not Scratch: aligned, the 256-channel 7x7 backward-filter (37 MB of
  // accumulators a thread; not a shape auto gives this kernel) ran 20-60% slower (measured
  // 2026-11-27); unaligned, it is what was measured when the rule was set.
  thread_local std::vector<float> acc_lanes;
  if (acc_lanes.size() < size_t(vectors * kLanes)) acc_lanes.resize(size_t(vectors * kLanes));
  return reinterpret_cast<V*>(acc_lanes.data());
}

// dw[e] = the slots' rows of sums added in slot order.
// Row by row rather than element by element: each element adds the same terms in the same order,
// but the rows stream (and vectorize) instead of striding a whole row apart (perf had the strided
// form hot on small layers).
void add_slot_rows(const float* slot_sums, int64_t slots, int64_t vectors, float* dw) {
  std::copy(slot_sums, slot_sums + vectors, dw);
  for (int64_t slot = 1; slot < slots; ++slot) {
    const float* row = slot_sums + slot * vectors;
    for (int64_t e = 0; e < vectors; ++e) dw[e] += row[e];
  }
}

}  // namespace

// Each slot of images sums its products lane by lane into vector accumulators ([c_out][c_in][taps]
// vectors, in its thread's cache), then adds each vector's 16 lanes (lane_sums' tree) into its own
// row of sums; the slots' rows are added in slot order.
void direct_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  const Geometry g = geometry(s);
  const int64_t count = round_up(g.out_h * g.wp, kLanes);  // positions holding gradient
  const int64_t per_slot = (s.n + kFilterSlots - 1) / kFilterSlots, slots = (s.n + per_slot - 1) / per_slot;
  const int64_t vectors = s.c_out * s.c_in * g.taps;
  // One row of sums per slot: 16 times smaller than the vector accumulators, so adding the slots
  // (written by different cores) moves little between caches. Kept by the calling thread between
  // calls, like every buffer here, so steady-state training allocates nothing; each slot writes
  // its whole row.
  thread_local Scratch<float> slot_rows;
  float* slot_sums = slot_rows.get(size_t(slots * vectors));
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
    V* acc = thread_accumulators(vectors);
    const int64_t begin = slot * per_slot, end = std::min(s.n, (slot + 1) * per_slot);
    for (int64_t i0 = begin; i0 < end; i0 += group) {
      const FilterImages im{std::min(group, end - i0), count, s.c_in * g.plane, s.c_out * count};
      prepare_images(s, g, x, dy, i0, im, planes, grads);
      accumulate_group(s, g, im, planes, grads, acc, i0 == begin);
    }
    lane_sums(acc, vectors, slot_sums + slot * vectors);
  }
  add_slot_rows(slot_sums, slots, vectors, dw);
  if (db) conv2d_bias_gradient(s, dy, db);
}

}  // namespace cg::kernels::cpu
