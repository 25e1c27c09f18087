// The direct 3x3 convolution behind conv_direct.h. Work per image: copy its channels into
// zero-bordered planes (rows w + 2 wide), then register tiles read the planes in place at the
// nine tap offsets. Output positions whose column falls in the two border columns, or past the
// last row, are computed and thrown away (the price of reading straight from the planes: 7% at
// 28x28, 14% at 14x14).
#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace cg::kernels::cpu {
namespace {

// 16 floats, one AVX-512 register (GCC/Clang vector extension); aligned(4): loads may be unaligned.
using V __attribute__((vector_size(64), aligned(4), may_alias)) = float;
constexpr int kLanes = 16;
constexpr int kTaps = 9;
constexpr int kRows = 8;                // output channels per forward tile (one broadcast each)
constexpr int kVecs = 3;                // vectors of positions per forward tile: 8 x 3 accumulators
constexpr int kCols = kVecs * kLanes;   // 48 positions per forward tile
constexpr int kFilterRows = 3;          // output channels per backward-filter tile: 3 x 9 accumulators
constexpr int64_t kFilterSlots = 8;     // backward-filter's fixed units of parallel work

inline V load(const float* p) { return *reinterpret_cast<const V*>(p); }
inline void store(float* p, V v) { *reinterpret_cast<V*>(p) = v; }
int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Where things sit in the padded planes of an h x w image.
struct Geometry {
  int64_t h, w;
  int64_t wp;         // row length of a plane: w + 2
  int64_t positions;  // output positions computed per image: h * wp rounded up to a forward tile
  int64_t plane;      // floats per plane: every tap's load from any computed position stays inside
  int64_t off[kTaps]; // plane offset of tap (ky, kx) from the output position: ky * wp + kx
};

Geometry geometry(int64_t h, int64_t w) {
  Geometry g{h, w, w + 2, 0, 0, {}};
  g.positions = round_up(h * g.wp, kCols);
  g.plane = round_up(g.positions + 2 * g.wp + 2 + kLanes, kLanes);
  for (int t = 0; t < kTaps; ++t) g.off[t] = (t / 3) * g.wp + t % 3;
  return g;
}

// Per-thread scratch, reused across calls so steady-state training allocates nothing here.
float* scratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[3];
  auto& b = buffers[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// dst[c] (c < channels, each g.plane floats) = src's [h][w] plane c with a zero border: pixel
// (y, x) at (y + 1) * wp + x + 1, zeros everywhere else. Each float is written once.
void pad_planes(const float* src, int64_t channels, const Geometry& g, float* dst) {
  for (int64_t c = 0; c < channels; ++c) {
    float* p = dst + c * g.plane;
    std::fill(p, p + g.wp + 1, 0.f);  // the top border row and the first row's left border
    for (int64_t y = 0; y < g.h; ++y) {
      float* row = p + (y + 1) * g.wp + 1;
      std::memcpy(row, src + (c * g.h + y) * g.w, sizeof(float) * size_t(g.w));
      row[g.w] = row[g.w + 1] = 0.f;  // this row's right border, the next row's left border
    }
    std::fill(p + (g.h + 1) * g.wp + 1, p + g.plane, 0.f);  // the bottom border row and the slack
  }
}

// dst[c] (c < channels, each `count` floats) = src's [h][w] plane c in rows wp long: pixel (y, x)
// at y * wp + x, zeros in the two columns past w and after the last row.
void widen_rows(const float* src, int64_t channels, const Geometry& g, int64_t count, float* dst) {
  for (int64_t c = 0; c < channels; ++c) {
    float* p = dst + c * count;
    for (int64_t y = 0; y < g.h; ++y) {
      float* row = p + y * g.wp;
      std::memcpy(row, src + (c * g.h + y) * g.w, sizeof(float) * size_t(g.w));
      row[g.w] = row[g.w + 1] = 0.f;
    }
    std::fill(p + g.h * g.wp, p + count, 0.f);
  }
}

// out[r][j] = sum over c < channels, t < 9 of wt[(c * 9 + t) * kRows + r] * in[c * plane + off[t] + j]
// for r < kRows, j < kCols; `in` points at the tile's first output position.
inline void forward_tile(const float* __restrict wt, int64_t channels, const float* __restrict in, int64_t plane,
                         const int64_t* off, float* __restrict out) {
  V acc[kRows][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < kVecs; ++v) acc[r][v] = V{};
  for (int64_t c = 0; c < channels; ++c) {
    const float* base = in + c * plane;
    const float* wc = wt + c * kTaps * kRows;
#pragma GCC unroll 9
    for (int t = 0; t < kTaps; ++t) {
      const float* src = base + off[t];
      V b[kVecs];
#pragma GCC unroll 3
      for (int v = 0; v < kVecs; ++v) b[v] = load(src + v * kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const V a = wc[t * kRows + r] - V{};  // a broadcast (x - 0 is exactly x)
#pragma GCC unroll 3
        for (int v = 0; v < kVecs; ++v) acc[r][v] += a * b[v];
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < kVecs; ++v) store(out + r * kCols + v * kLanes, acc[r][v]);
}

// Copies the valid positions of a forward tile (rows < `rows`, positions q0 .. q0 + kCols) into
// the NCHW output planes of one image, adding the bias.
void store_tile(const float* tile, int rows, int64_t q0, const Geometry& g, float* out, const float* bias) {
  const int64_t hw = g.h * g.w;
  const int64_t y_end = std::min(g.h, (q0 + kCols + g.wp - 1) / g.wp);
  for (int r = 0; r < rows; ++r) {
    const float b = bias ? bias[r] : 0.f;
    for (int64_t y = q0 / g.wp; y < y_end; ++y) {
      const int64_t lo = std::max<int64_t>(0, q0 - y * g.wp), hi = std::min(g.w, q0 + kCols - y * g.wp);
      const float* src = tile + r * kCols + y * g.wp - q0;
      float* dst = out + r * hw + y * g.w;
      for (int64_t x = lo; x < hi; ++x) dst[x] = src[x] + b;
    }
  }
}

// out[n, c_out, h, w] = the 3x3 padding-1 convolution of in[n, c_in, h, w] with the packed
// filters wt ([ceil(c_out / 8)][c_in][9][8], zero rows past c_out), plus bias. One image per
// unit of parallel work.
void run_forward(int64_t n, int64_t c_in, int64_t c_out, int64_t h, int64_t w, const float* in, const float* wt,
                 const float* bias, float* out) {
  const Geometry g = geometry(h, w);
  const int64_t tiles = (c_out + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    float* planes = scratch(0, size_t(c_in * g.plane));
    pad_planes(in + i * c_in * h * w, c_in, g, planes);
    alignas(64) float tile[kRows * kCols];
    float* out_image = out + i * c_out * h * w;
    for (int64_t q0 = 0; q0 < g.positions; q0 += kCols)
      for (int64_t ct = 0; ct < tiles; ++ct) {
        forward_tile(wt + ct * c_in * kTaps * kRows, c_in, planes + q0, g.plane, g.off, tile);
        const int rows = int(std::min<int64_t>(kRows, c_out - ct * kRows));
        store_tile(tile, rows, q0, g, out_image + ct * kRows * h * w, bias ? bias + ct * kRows : nullptr);
      }
  }
}

// Packs filters for run_forward: wt[tile][c][t][r] = filter(tile * 8 + r, c, t), zero past `outs`.
// filter(o, c, t) reads w[o][c][t] (forward) or, for backward-data, w[c][o][8 - t] (rotated,
// input and output channels swapped).
template <typename Filter>
std::vector<float> pack_filters(int64_t outs, int64_t ins, Filter filter) {
  const int64_t tiles = (outs + kRows - 1) / kRows;
  std::vector<float> wt(size_t(tiles * ins * kTaps * kRows), 0.f);
  for (int64_t o = 0; o < outs; ++o)
    for (int64_t c = 0; c < ins; ++c)
      for (int t = 0; t < kTaps; ++t)
        wt[size_t(((o / kRows * ins + c) * kTaps + t) * kRows + o % kRows)] = filter(o, c, t);
  return wt;
}

// acc[r][t] += sum over positions q < count of dy[r][q] * x[q + off[t]], lane by lane, for R rows
// of dy `dy_stride` apart; acc rows are `acc_stride` vectors apart.
template <int R>
inline void filter_tile(const float* __restrict dy, int64_t dy_stride, const float* __restrict x, const int64_t* off,
                        int64_t count, V* acc, int64_t acc_stride) {
  V a[R][kTaps];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 9
    for (int t = 0; t < kTaps; ++t) a[r][t] = acc[r * acc_stride + t];
  for (int64_t q = 0; q < count; q += kLanes) {
    V d[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) d[r] = load(dy + r * dy_stride + q);
#pragma GCC unroll 9
    for (int t = 0; t < kTaps; ++t) {
      V xv = load(x + q + off[t]);
      // Keep the load in a register: GCC otherwise folds it into each of the R multiply-adds,
      // loading the same (mostly cache-line-splitting) vector R times, which made this load-bound.
      asm("" : "+v"(xv));
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) a[r][t] += d[r] * xv;
    }
  }
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 9
    for (int t = 0; t < kTaps; ++t) acc[r * acc_stride + t] = a[r][t];
}

}  // namespace

bool direct_conv_supports(const Conv2dShape& s) {
  return s.kh == 3 && s.kw == 3 && s.stride == 1 && s.pad == 1;
}

void direct_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y) {
  const std::vector<float> wt =
      pack_filters(s.c_out, s.c_in, [&](int64_t o, int64_t c, int t) { return w[(o * s.c_in + c) * kTaps + t]; });
  run_forward(s.n, s.c_in, s.c_out, s.h, s.w, x, wt.data(), bias, y);
}

void direct_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  const std::vector<float> wt = pack_filters(
      s.c_in, s.c_out, [&](int64_t o, int64_t c, int t) { return w[(c * s.c_in + o) * kTaps + (kTaps - 1 - t)]; });
  run_forward(s.n, s.c_out, s.c_in, s.h, s.w, dy, wt.data(), nullptr, dx);
}

// Each slot of images sums its products lane by lane into its own vector accumulators
// ([c_out][c_in][9] vectors); the slots' accumulators are then added in slot order and each
// vector's 16 lanes in lane order.
void direct_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  const Geometry g = geometry(s.h, s.w);
  const int64_t hw = s.h * s.w, count = round_up(s.h * g.wp, kLanes);  // positions holding gradient
  const int64_t slots = std::min(kFilterSlots, s.n), per_slot = (s.n + slots - 1) / slots;
  const int64_t vectors = s.c_out * s.c_in * kTaps;
  std::vector<float> acc_lanes(size_t(slots * vectors * kLanes), 0.f);
  V* acc = reinterpret_cast<V*>(acc_lanes.data());
#pragma omp parallel for schedule(static) if (slots > 1)
  for (int64_t slot = 0; slot < slots; ++slot) {
    float* planes = scratch(0, size_t(s.c_in * g.plane));
    float* grads = scratch(1, size_t(s.c_out * count));  // dy in rows wp long, zeros past each row's w
    V* slot_acc = acc + slot * vectors;
    for (int64_t i = slot * per_slot; i < std::min(s.n, (slot + 1) * per_slot); ++i) {
      pad_planes(x + i * s.c_in * hw, s.c_in, g, planes);
      widen_rows(dy + i * s.c_out * hw, s.c_out, g, count, grads);
      for (int64_t o = 0; o < s.c_out; o += kFilterRows) {
        const int64_t rows = std::min<int64_t>(kFilterRows, s.c_out - o);
        for (int64_t c = 0; c < s.c_in; ++c) {
          V* a = slot_acc + (o * s.c_in + c) * kTaps;
          const float* d = grads + o * count;
          const float* xc = planes + c * g.plane;
          if (rows == kFilterRows) {
            filter_tile<kFilterRows>(d, count, xc, g.off, count, a, s.c_in * kTaps);
          } else if (rows == 2) {
            filter_tile<2>(d, count, xc, g.off, count, a, s.c_in * kTaps);
          } else {
            filter_tile<1>(d, count, xc, g.off, count, a, s.c_in * kTaps);
          }
        }
      }
    }
  }
  for (int64_t e = 0; e < vectors; ++e) {
    V sum = acc[e];
    for (int64_t slot = 1; slot < slots; ++slot) sum += acc[slot * vectors + e];
    float total = 0.f;
    for (int l = 0; l < kLanes; ++l) total += sum[l];
    dw[e] = total;
  }
  if (db) {
    for (int64_t o = 0; o < s.c_out; ++o) {
      float total = 0.f;
      for (int64_t i = 0; i < s.n; ++i) {
        const float* d = dy + (i * s.c_out + o) * hw;
        for (int64_t p = 0; p < hw; ++p) total += d[p];
      }
      db[o] = total;
    }
  }
}

}  // namespace cg::kernels::cpu
