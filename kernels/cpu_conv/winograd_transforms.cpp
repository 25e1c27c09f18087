// The filter transforms of F(4x4, 3x3) and F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2015), applied as 1-D passes: each pass below is one matrix on
// one axis. The input transform (B^T) is in winograd_input_transform.cpp, the output transform
// (A^T) in winograd_output_transform.cpp, the output gradient's (A) in winograd_grad_transform.cpp.
//   F(4x4): G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   F(2x2): G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
// F(2x2)'s halvings are exact in binary, so its filter transform rounds only its two sums: one
// reason it is as exact as the direct convolution where F(4x4)'s sixths and twenty-fourths are not
// (bench/NOTES.md, issue 41).
#include "kernels/cpu_conv/winograd_transforms.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace cg::kernels::cpu::winograd {
namespace {

constexpr float k6 = 1.f / 6.f, k12 = 1.f / 12.f, k24 = 1.f / 24.f;
// g (3) -> G g (T + 2), 16 filters' at once
template <int T>
inline void gm(const Lanes g[3], Lanes o[T + 2]) {
  if constexpr (T == 2) {
    o[0] = g[0];
    o[1] = 0.5f * (g[0] + g[1] + g[2]);
    o[2] = 0.5f * (g[0] - g[1] + g[2]);
    o[3] = g[2];
    return;
  }
  o[0] = 0.25f * g[0];
  o[1] = -k6 * (g[0] + g[1] + g[2]);
  o[2] = -k6 * (g[0] - g[1] + g[2]);
  o[3] = k24 * g[0] + k12 * g[1] + k6 * g[2];
  o[4] = k24 * g[0] - k12 * g[1] + k6 * g[2];
  o[5] = g[2];
}
// u (T + 2) -> G^T u (3)
template <int T>
inline void gt(const float u[T + 2], float o[3]) {
  if constexpr (T == 2) {
    o[0] = u[0] + 0.5f * (u[1] + u[2]);
    o[1] = 0.5f * (u[1] - u[2]);
    o[2] = 0.5f * (u[1] + u[2]) + u[3];
    return;
  }
  o[0] = 0.25f * u[0] - k6 * (u[1] + u[2]) + k24 * (u[3] + u[4]);
  o[1] = k6 * (u[2] - u[1]) + k12 * (u[3] - u[4]);
  o[2] = k6 * (u[3] + u[4] - u[1] - u[2]) + u[5];
}

// taps[t][j] = tap t (row-major, after the rotation) of lane j's filter, 0 where offsets[j] < 0:
// one AVX-512 gather a tap.
inline void load_taps(const float* w, const OffsetLanes& offsets, bool rotated, Lanes taps[9]) {
#if defined(__AVX512F__)
  const __m512i base = __m512i(offsets);
  const __mmask16 live = _mm512_cmpge_epi32_mask(base, _mm512_setzero_si512());
  for (int t = 0; t < 9; ++t) {
    const __m512i at = _mm512_add_epi32(base, _mm512_set1_epi32(rotated ? 8 - t : t));
    taps[t] = Lanes(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, at, w, 4));
  }
#else
  for (int t = 0; t < 9; ++t)
    for (int j = 0; j < kLanes; ++j) taps[t][j] = offsets[j] < 0 ? 0.f : w[offsets[j] + (rotated ? 8 - t : t)];
#endif
}

// dst[0, 16) = v, lanes whose bit is clear in `store` left as they are.
inline void store_lanes(Lanes v, uint32_t store, float* dst) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(dst, __mmask16(store), __m512(v));
#else
  for (int j = 0; j < kLanes; ++j)
    if (store >> j & 1u) dst[j] = v[j];
#endif
}

}  // namespace

template <int T>
void filter_transform_lanes(const float* w, const OffsetLanes& offsets, bool rotated, uint32_t store, float* u,
                            int64_t e_stride) {
  constexpr int n = Tile<T>::kInput;
  Lanes g[9];
  load_taps(w, offsets, rotated, g);
  Lanes t[n][3];  // G g: G down the columns
  for (int j = 0; j < 3; ++j) {
    const Lanes c[3] = {g[j], g[3 + j], g[6 + j]};
    Lanes o[n];
    gm<T>(c, o);
    for (int r = 0; r < n; ++r) t[r][j] = o[r];
  }
  for (int r = 0; r < n; ++r) {
    Lanes o[n];
    gm<T>(t[r], o);
    for (int c = 0; c < n; ++c) store_lanes(o[c], store, u + (r * n + c) * e_stride);
  }
}

template <int T>
void filter_transform_adjoint(const float* u, int64_t e_stride, float* g) {
  constexpr int n = Tile<T>::kInput;
  float t[3][n];  // G^T u: G^T down the columns
  for (int c = 0; c < n; ++c) {
    float col[n];
    for (int r = 0; r < n; ++r) col[r] = u[(r * n + c) * e_stride];
    float o[3];
    gt<T>(col, o);
    for (int i = 0; i < 3; ++i) t[i][c] = o[i];
  }
  for (int i = 0; i < 3; ++i) gt<T>(t[i], g + i * 3);
}

template void filter_transform_lanes<2>(const float*, const OffsetLanes&, bool, uint32_t, float*, int64_t);
template void filter_transform_lanes<4>(const float*, const OffsetLanes&, bool, uint32_t, float*, int64_t);
template void filter_transform_adjoint<2>(const float*, int64_t, float*);
template void filter_transform_adjoint<4>(const float*, int64_t, float*);

}  // namespace cg::kernels::cpu::winograd
