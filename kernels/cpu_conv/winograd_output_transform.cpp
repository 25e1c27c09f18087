// The output transforms of F(4x4, 3x3) and F(2x2, 3x3) (kernels/cpu_conv/winograd_transforms.h):
// y = A^T m A + bias,
//   F(4x4): A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 -1 4 -4 0; 0 1 -1 8 -8 1]
//   F(2x2): A^T = [1 1 1 0; 0 1 -1 -1]
// for 16 lanes at once (16 tiles of one channel, or one tile of 16 channels), as T*T vectors (one
// per pixel of the tile), or for 16 tiles as output rows in tile order. The first form, one plane
// at a time vectorized across a tile row, ran scalar on small planes (a 14x14 plane has tile rows
// of 4 tiles) and took 40% of a 32-channel 14x14 forward.
#include <utility>

#include "kernels/cpu_conv/vec_transpose.h"
#include "kernels/cpu_conv/winograd_transforms.h"

namespace cg::kernels::cpu::winograd {
namespace {

using V = Vec<float>;
static_assert(kVecLanes<float> == kLanes, "one lane per tile, 16 tiles, 16 pixels a tile");

// m (T + 2) -> A^T m (T)
template <int T>
inline void at(const V m[T + 2], V o[T]) {
  if constexpr (T == 2) {
    o[0] = m[0] + m[1] + m[2];
    o[1] = m[1] - m[2] - m[3];
    return;
  }
  const V p12 = m[1] + m[2], m12 = m[1] - m[2], p34 = m[3] + m[4], m34 = m[3] - m[4];
  o[0] = m[0] + p12 + p34;
  o[1] = m12 + 2.f * m34;
  o[2] = p12 + 4.f * p34;
  o[3] = m12 + 8.f * m34 + m[5];
}

// Lanes [8H, 8H + 8) of a and b interleaved: a[8H], b[8H], a[8H + 1], b[8H + 1], ...
template <int H, size_t... I>
inline V interleave_half(const V& a, const V& b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, ((I % 2 ? kLanes : 0) + 8 * H + int(I) / 2)...);
}
// Pairs of lanes [8H, 8H + 8) of a and c in turn: a[8H], a[8H + 1], c[8H], c[8H + 1], a[8H + 2], ...
template <int H, size_t... I>
inline V interleave_pairs(const V& a, const V& c, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, c, ((I % 4 >= 2 ? kLanes : 0) + 8 * H + int(I) / 4 * 2 + int(I) % 2)...);
}

// Column vectors p[0 .. T) (lane j's column c in p[c][j]) as T vectors in lane order: lane j's T
// values at floats j*T .. j*T + T of out. Two-source permutes: 2 for T = 2, 6 for T = 4.
template <int T>
inline void interleave_columns(const V p[T], V out[T]) {
  const auto lanes = std::make_index_sequence<kLanes>();
  if constexpr (T == 2) {
    out[0] = interleave_half<0>(p[0], p[1], lanes);
    out[1] = interleave_half<1>(p[0], p[1], lanes);
  } else {
    const V a = interleave_half<0>(p[0], p[1], lanes), b = interleave_half<1>(p[0], p[1], lanes);
    const V c = interleave_half<0>(p[2], p[3], lanes), d = interleave_half<1>(p[2], p[3], lanes);
    out[0] = interleave_pairs<0>(a, c, lanes);
    out[1] = interleave_pairs<1>(a, c, lanes);
    out[2] = interleave_pairs<0>(b, d, lanes);
    out[3] = interleave_pairs<1>(b, d, lanes);
  }
}

}  // namespace

template <int T>
void output_transform_pixels(const float* m, int64_t e_stride, Lanes bias, Lanes* pixels) {
  constexpr int n = Tile<T>::kInput;
  V rows[n][T];  // A^T across each of the T + 2 rows of every tile
  for (int i = 0; i < n; ++i) {
    V v[n];
    for (int j = 0; j < n; ++j) v[j] = *reinterpret_cast<const V*>(m + (i * n + j) * e_stride);
    at<T>(v, rows[i]);
  }
  for (int c = 0; c < T; ++c) {  // then down the columns
    V v[n];
    for (int i = 0; i < n; ++i) v[i] = rows[i][c];
    V o[T];
    at<T>(v, o);
    for (int r = 0; r < T; ++r) pixels[r * T + c] = o[r] + bias;
  }
}

template <int T>
void output_transform_rows(const float* m, int64_t e_stride, Lanes bias, Lanes* rows) {
  V pixels[T * T];
  output_transform_pixels<T>(m, e_stride, bias, pixels);
  for (int r = 0; r < T; ++r) interleave_columns<T>(pixels + r * T, reinterpret_cast<V*>(rows) + r * T);
}

template void output_transform_pixels<2>(const float*, int64_t, Lanes, Lanes*);
template void output_transform_pixels<4>(const float*, int64_t, Lanes, Lanes*);
template void output_transform_rows<2>(const float*, int64_t, Lanes, Lanes*);
template void output_transform_rows<4>(const float*, int64_t, Lanes, Lanes*);

}  // namespace cg::kernels::cpu::winograd
