// The output-gradient transforms of Winograd backward-filter (kernels/cpu_conv/winograd_transforms.h):
// Z = A g A^T of every T x T tile, the adjoint of the output transform,
//   F(4x4): A = [1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -2 4 -8; 0 0 0 1]
//   F(2x2): A = [1 0; 1 1; 1 -1; 0 -1]
// one plane at a time (vectorized across the tiles of a tile row) or 16 planes at a time (one
// vector lane per plane: at 14x14 a tile row is 4 tiles, too short for the first form's loops,
// which then ran scalar and took a third of the backward-filter's time).
// Compiled with -ffp-contract=off (CMakeLists.txt), so that both forms give the same bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu_conv/winograd_transforms.h"

namespace cg::kernels::cpu::winograd {
namespace {

using LanesAt __attribute__((vector_size(64), aligned(4), may_alias)) = float;  // Lanes at any float address

// y (Tile) -> A y (Tile + 2), for one value (float) or 16 planes' (Lanes)
template <int Tile, class T>
inline void a(const T y[Tile], T o[Tile + 2]) {
  if constexpr (Tile == 2) {
    o[0] = y[0];
    o[1] = y[0] + y[1];
    o[2] = y[0] - y[1];
    o[3] = -y[1];
    return;
  }
  const T p02 = y[0] + y[2], p13 = y[1] + y[3], q02 = y[0] + 4.f * y[2], q13 = 2.f * y[1] + 8.f * y[3];
  o[0] = y[0];
  o[1] = p02 + p13;
  o[2] = p02 - p13;
  o[3] = q02 + q13;
  o[4] = q02 - q13;
  o[5] = y[3];
}

// Row r of a tile row's column transforms (p: [T phases][tw]) along the row: A of every tile's T
// values, written to the T + 2 elements r * (T + 2) + k, e_stride apart.
template <int T>
inline void transform_row(const float* __restrict p, int64_t tw, float* dst, int64_t e_stride) {
  float *__restrict d0 = dst, *__restrict d1 = dst + e_stride, *__restrict d2 = dst + 2 * e_stride;
  float* __restrict d3 = dst + 3 * e_stride;
  if constexpr (T == 2) {
#pragma GCC ivdep
    for (int64_t l = 0; l < tw; ++l) {
      const float y[2] = {p[l], p[tw + l]};
      float o[4];
      a<2>(y, o);
      d0[l] = o[0], d1[l] = o[1], d2[l] = o[2], d3[l] = o[3];
    }
  } else {
    float *__restrict d4 = dst + 4 * e_stride, *__restrict d5 = dst + 5 * e_stride;
#pragma GCC ivdep
    for (int64_t l = 0; l < tw; ++l) {
      const float y[4] = {p[l], p[tw + l], p[2 * tw + l], p[3 * tw + l]};
      float o[6];
      a<4>(y, o);
      d0[l] = o[0], d1[l] = o[1], d2[l] = o[2], d3[l] = o[3], d4[l] = o[4], d5[l] = o[5];
    }
  }
}

}  // namespace

template <int T>
void grad_output_transform(const float* plane, int64_t oh, int64_t ow, int64_t th, int64_t tw, float* out,
                           int64_t e_stride, RowScratch scratch) {
  constexpr int n = Tile<T>::kInput;
  const int64_t width = T * tw;
  float* __restrict row = scratch.data;                          // one gradient row, zero past the edge
  float* __restrict q = scratch.data + scratch.width;            // [T rows][T phases][tw]
  float* __restrict t = scratch.data + scratch.width + T * T * tw;  // A down the columns: [n][T][tw]
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < T; ++i) {
      const int64_t oy = ty * T + i;
      if (oy >= oh) {
        std::fill(q + i * T * tw, q + (i + 1) * T * tw, 0.f);
        continue;
      }
      std::memcpy(row, plane + oy * ow, sizeof(float) * size_t(ow));
      std::fill(row + ow, row + width, 0.f);
      for (int k = 0; k < T; ++k)
        for (int64_t l = 0; l < tw; ++l) q[(i * T + k) * tw + l] = row[T * l + k];
    }
    for (int64_t x = 0; x < T * tw; ++x) {
      float y[T], o[n];
      for (int i = 0; i < T; ++i) y[i] = q[i * T * tw + x];
      a<T>(y, o);
      for (int r = 0; r < n; ++r) t[r * T * tw + x] = o[r];
    }
    for (int r = 0; r < n; ++r) transform_row<T>(t + r * T * tw, tw, out + r * n * e_stride + ty * tw, e_stride);
  }
}

template <int T>
void grad_output_transform_lanes(const float* planes, int64_t plane_stride, int64_t oh, int64_t ow, int64_t th,
                                 int64_t tw, float* out, int64_t e_stride, int64_t tile_stride, const float* next) {
  constexpr int n = Tile<T>::kInput;
  const int64_t ph = T * th, pw = T * tw;
  Lanes* padded = lanes_staging(ph, pw, 0, oh, 0, ow);  // the planes, zero past their edges
  gather_plane_lanes(planes, plane_stride, oh, ow, ow, padded, pw, next);
  // The same passes as grad_output_transform, in the same order: down the columns, then along the rows.
  for (int64_t ty = 0; ty < th; ++ty)
    for (int64_t tx = 0; tx < tw; ++tx) {
      const Lanes* corner = padded + T * ty * pw + T * tx;
      float* tile = out + (ty * tw + tx) * tile_stride;
      Lanes col[n][T];
      for (int x = 0; x < T; ++x) {
        Lanes y[T], o[n];
        for (int i = 0; i < T; ++i) y[i] = corner[i * pw + x];
        a<T>(y, o);
        for (int r = 0; r < n; ++r) col[r][x] = o[r];
      }
      for (int r = 0; r < n; ++r) {
        Lanes o[n];
        a<T>(col[r], o);
        for (int k = 0; k < n; ++k) *reinterpret_cast<LanesAt*>(tile + (r * n + k) * e_stride) = o[k];
      }
    }
}

template void grad_output_transform<2>(const float*, int64_t, int64_t, int64_t, int64_t, float*, int64_t, RowScratch);
template void grad_output_transform<4>(const float*, int64_t, int64_t, int64_t, int64_t, float*, int64_t, RowScratch);
template void grad_output_transform_lanes<2>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, float*,
                                             int64_t, int64_t, const float*);
template void grad_output_transform_lanes<4>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, float*,
                                             int64_t, int64_t, const float*);

}  // namespace cg::kernels::cpu::winograd
