// The direct convolution's shared pieces (kernels/cpu_conv/conv_direct.h), for its three files:
// conv_direct.cpp (the planes, the forward tiles, forward and stride-1 backward-data),
// conv_direct_strided_data.cpp (stride-2 backward-data) and conv_direct_filter.cpp
// (backward-filter). Not an interface of its own: nothing outside them includes it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/types.h"

namespace cg::kernels::cpu::direct {

// 16 floats, one AVX-512 register (GCC/Clang vector extension); aligned(4): loads may be unaligned.
using V __attribute__((vector_size(64), aligned(4), may_alias)) = float;
constexpr int kLanes = 16;
constexpr int kMaxTaps = 9;
#if defined(__AVX512F__)
constexpr int kRows = 8;                // output channels per forward tile (one broadcast each)
constexpr int kVecs = 3;                // vectors of positions per forward tile: 8 x 3 accumulators
#else
// AVX2 has 16 registers of 8 floats, so the 8 x 3 tile's 24 vectors (48 registers) spilled on
// every multiply-add; 6 x 1 keeps 12 registers of accumulators, 2 for the loaded positions and
// one for the broadcast weight.
constexpr int kRows = 6;
constexpr int kVecs = 1;
#endif
constexpr int kCols = kVecs * kLanes;   // 48 positions per forward tile

inline V load(const float* p) { return *reinterpret_cast<const V*>(p); }
inline void store(float* p, V v) { *reinterpret_cast<V*>(p) = v; }
inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

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
// The planes of a layer's input x (forward, backward-filter; stride-1 backward-data runs it on dy).
Geometry geometry(const Conv2dShape& s);

// Per-thread scratch (slots 0 and 1), reused across calls so steady-state training allocates
// nothing here.
float* scratch(int slot, size_t n);

// dst[c] (c < channels, each g.plane floats) = the phase planes of src's [h][w] plane c.
void pad_planes(const float* src, int64_t channels, const Geometry& g, float* dst);

// dst[c] (c < channels, each `count` floats) = src's [out_h][out_w] plane c in rows wp long.
void widen_rows(const float* src, int64_t channels, const Geometry& g, int64_t count, float* dst);

// One forward tile: out[r][j] = sum over c < channels, t < taps of wt[(c * taps + t) * kRows + r] *
// in[c * plane + off[t] + j] for r < kRows, j < vecs * kLanes (out's rows kCols apart). Taps 9 and
// 1 (3x3 and 1x1 layers), 2 and 4 (stride-2 backward-data's phases); no taps: a zero tile.
void any_forward_tile(int taps, int vecs, const float* wt, int64_t channels, const float* in, int64_t plane,
                      const int64_t* off, float* out);

// out[n, c_out, out_h, out_w] = the convolution of in[n, c_in, h, w] (geometry g) with filters
// packed by pack_filters, plus bias (may be null).
void run_forward(int64_t n, int64_t c_in, int64_t c_out, const Geometry& g, const float* in, const float* wt,
                 const float* bias, float* out);

// Packs filters for run_forward: wt[tile][c][t][r] = filter(tile * 8 + r, c, t), zero past `outs`.
// filter(o, c, t) reads w[o][c][t] (forward) or, for backward-data, w[c][o][8 - t] (rotated,
// input and output channels swapped).
template <typename Filter>
inline std::vector<float> pack_filters(int64_t outs, int64_t ins, int taps, Filter filter) {
  const int64_t tiles = (outs + kRows - 1) / kRows;
  std::vector<float> wt(size_t(tiles * ins * taps * kRows), 0.f);
  for (int64_t o = 0; o < outs; ++o)
    for (int64_t c = 0; c < ins; ++c)
      for (int t = 0; t < taps; ++t)
        wt[size_t(((o / kRows * ins + c) * taps + t) * kRows + o % kRows)] = filter(o, c, t);
  return wt;
}

// dx from dy for a stride-2 layer (conv_direct_strided_data.cpp).
void strided_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx);

}  // namespace cg::kernels::cpu::direct
