// The output-gradient transform of F(4x4, 3x3) backward-filter (kernels/cpu_conv/winograd_transforms.h):
// Z = A g A^T of every 4x4 tile, the adjoint of the output transform,
//   A = [1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -2 4 -8; 0 0 0 1]
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

// y (4) -> A y (6), for one value (float) or 16 planes' (Lanes)
template <class T>
inline void a(const T y[4], T o[6]) {
  const T p02 = y[0] + y[2], p13 = y[1] + y[3], q02 = y[0] + 4.f * y[2], q13 = 2.f * y[1] + 8.f * y[3];
  o[0] = y[0];
  o[1] = p02 + p13;
  o[2] = p02 - p13;
  o[3] = q02 + q13;
  o[4] = q02 - q13;
  o[5] = y[3];
}

}  // namespace

void grad_output_transform(const float* plane, int64_t oh, int64_t ow, int64_t th, int64_t tw, float* out,
                           int64_t e_stride, RowScratch scratch) {
  const int64_t width = kTile * tw;
  float* __restrict row = scratch.data;                       // one gradient row, zero past the edge
  float* __restrict q = scratch.data + scratch.width;         // [4 rows][4 phases][tw]
  float* __restrict t = scratch.data + scratch.width + 16 * tw;  // A down the columns: [6][4][tw]
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < kTile; ++i) {
      const int64_t oy = ty * kTile + i;
      if (oy >= oh) {
        std::fill(q + i * 4 * tw, q + (i + 1) * 4 * tw, 0.f);
        continue;
      }
      std::memcpy(row, plane + oy * ow, sizeof(float) * size_t(ow));
      std::fill(row + ow, row + width, 0.f);
      for (int k = 0; k < kTile; ++k)
        for (int64_t l = 0; l < tw; ++l) q[(i * 4 + k) * tw + l] = row[kTile * l + k];
    }
    for (int64_t x = 0; x < 4 * tw; ++x) {
      const float y[4] = {q[x], q[4 * tw + x], q[8 * tw + x], q[12 * tw + x]};
      float o[6];
      a(y, o);
      for (int r = 0; r < 6; ++r) t[r * 4 * tw + x] = o[r];
    }
    for (int r = 0; r < kInput; ++r) {
      const float* __restrict p = t + r * 4 * tw;
      float* dst = out + r * kInput * e_stride + ty * tw;
      float *__restrict d0 = dst, *__restrict d1 = dst + e_stride, *__restrict d2 = dst + 2 * e_stride;
      float *__restrict d3 = dst + 3 * e_stride, *__restrict d4 = dst + 4 * e_stride, *__restrict d5 = dst + 5 * e_stride;
#pragma GCC ivdep
      for (int64_t l = 0; l < tw; ++l) {
        const float y[4] = {p[l], p[tw + l], p[2 * tw + l], p[3 * tw + l]};
        float o[6];
        a(y, o);
        d0[l] = o[0], d1[l] = o[1], d2[l] = o[2], d3[l] = o[3], d4[l] = o[4], d5[l] = o[5];
      }
    }
  }
}

void grad_output_transform_lanes(const float* planes, int64_t plane_stride, int64_t oh, int64_t ow, int64_t th,
                                 int64_t tw, float* out, int64_t e_stride, int64_t tile_stride, const float* next) {
  const int64_t ph = kTile * th, pw = kTile * tw;
  Lanes* padded = lanes_staging(ph, pw, 0, oh, 0, ow);  // the planes, zero past their edges
  gather_plane_lanes(planes, plane_stride, oh, ow, ow, padded, pw, next);
  // The same passes as grad_output_transform, in the same order: down the columns, then along the rows.
  for (int64_t ty = 0; ty < th; ++ty)
    for (int64_t tx = 0; tx < tw; ++tx) {
      const Lanes* corner = padded + kTile * ty * pw + kTile * tx;
      float* tile = out + (ty * tw + tx) * tile_stride;
      Lanes col[kInput][kTile];
      for (int x = 0; x < kTile; ++x) {
        Lanes y[kTile], o[kInput];
        for (int i = 0; i < kTile; ++i) y[i] = corner[i * pw + x];
        a(y, o);
        for (int r = 0; r < kInput; ++r) col[r][x] = o[r];
      }
      for (int r = 0; r < kInput; ++r) {
        Lanes o[kInput];
        a(col[r], o);
        for (int k = 0; k < kInput; ++k) *reinterpret_cast<LanesAt*>(tile + (r * kInput + k) * e_stride) = o[k];
      }
    }
}

}  // namespace cg::kernels::cpu::winograd
