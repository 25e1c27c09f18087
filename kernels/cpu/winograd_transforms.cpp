// F(4x4, 3x3) transform matrices (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015), applied as 1-D passes: each pass below is one matrix on one axis. The input
// transform (B^T) is in winograd_input_transform.cpp, the output gradient's (A) in
// winograd_grad_transform.cpp.
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 -1 4 -4 0; 0 1 -1 8 -8 1]
#include "kernels/cpu/winograd_transforms.h"

#include <algorithm>
#include <cstring>

namespace cg::kernels::cpu::winograd {
namespace {

// m (6) -> A^T m (4)
inline void at(const float m[6], float o[4]) {
  const float p12 = m[1] + m[2], m12 = m[1] - m[2], p34 = m[3] + m[4], m34 = m[3] - m[4];
  o[0] = m[0] + p12 + p34;
  o[1] = m12 + 2.f * m34;
  o[2] = p12 + 4.f * p34;
  o[3] = m12 + 8.f * m34 + m[5];
}
constexpr float k6 = 1.f / 6.f, k12 = 1.f / 12.f, k24 = 1.f / 24.f;
// g (3) -> G g (6)
inline void gm(const float g[3], float o[6]) {
  o[0] = 0.25f * g[0];
  o[1] = -k6 * (g[0] + g[1] + g[2]);
  o[2] = -k6 * (g[0] - g[1] + g[2]);
  o[3] = k24 * g[0] + k12 * g[1] + k6 * g[2];
  o[4] = k24 * g[0] - k12 * g[1] + k6 * g[2];
  o[5] = g[2];
}
// u (6) -> G^T u (3)
inline void gt(const float u[6], float o[3]) {
  o[0] = 0.25f * u[0] - k6 * (u[1] + u[2]) + k24 * (u[3] + u[4]);
  o[1] = k6 * (u[2] - u[1]) + k12 * (u[3] - u[4]);
  o[2] = k6 * (u[3] + u[4] - u[1] - u[2]) + u[5];
}

}  // namespace

void output_transform(const float* m, int64_t e_stride, int64_t th, int64_t tw, float bias, float* plane,
                      int64_t oh, int64_t ow, RowScratch scratch) {
  float* __restrict s = scratch.data;            // A^T across each tile's columns: [6 rows][4 phases][tw]
  float* __restrict o = scratch.data + 24 * tw;  // then down the columns: [4 rows][4 phases][tw]
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < kInput; ++i) {
      const float* src = m + i * kInput * e_stride + ty * tw;
      const float *__restrict m0 = src, *__restrict m1 = src + e_stride, *__restrict m2 = src + 2 * e_stride;
      const float *__restrict m3 = src + 3 * e_stride, *__restrict m4 = src + 4 * e_stride;
      const float* __restrict m5 = src + 5 * e_stride;
      float* __restrict dst = s + i * 4 * tw;
#pragma GCC ivdep
      for (int64_t l = 0; l < tw; ++l) {
        const float v[6] = {m0[l], m1[l], m2[l], m3[l], m4[l], m5[l]};
        float r[4];
        at(v, r);
        dst[l] = r[0];
        dst[tw + l] = r[1];
        dst[2 * tw + l] = r[2];
        dst[3 * tw + l] = r[3];
      }
    }
    for (int64_t x = 0; x < 4 * tw; ++x) {
      const float v[6] = {s[x], s[4 * tw + x], s[8 * tw + x], s[12 * tw + x], s[16 * tw + x], s[20 * tw + x]};
      float r[4];
      at(v, r);
      for (int j = 0; j < kTile; ++j) o[j * 4 * tw + x] = r[j] + bias;
    }
    const int rows = int(std::min<int64_t>(kTile, oh - ty * kTile));
    for (int r = 0; r < rows; ++r) {  // phases back to pixel order
      float* __restrict dst = plane + (ty * kTile + r) * ow;
      const float* __restrict src = o + r * 4 * tw;
      if (kTile * tw == ow) {
        for (int64_t l = 0; l < tw; ++l)
          for (int k = 0; k < kTile; ++k) dst[kTile * l + k] = src[k * tw + l];
      } else {
        for (int64_t x = 0; x < ow; ++x) dst[x] = src[(x % kTile) * tw + x / kTile];
      }
    }
  }
}

void filter_transform(const float* g, int64_t row, int64_t col, float* u, int64_t e_stride) {
  float t[6][3];  // G g: G down the columns
  for (int j = 0; j < 3; ++j) {
    const float c[3] = {g[j * col], g[row + j * col], g[2 * row + j * col]};
    float o[6];
    gm(c, o);
    for (int r = 0; r < 6; ++r) t[r][j] = o[r];
  }
  for (int r = 0; r < 6; ++r) {
    float o[6];
    gm(t[r], o);
    for (int c = 0; c < 6; ++c) u[(r * 6 + c) * e_stride] = o[c];
  }
}

void filter_transform_adjoint(const float* u, int64_t e_stride, float* g) {
  float t[3][6];  // G^T u: G^T down the columns
  for (int c = 0; c < 6; ++c) {
    const float col[6] = {u[c * e_stride], u[(6 + c) * e_stride], u[(12 + c) * e_stride],
                          u[(18 + c) * e_stride], u[(24 + c) * e_stride], u[(30 + c) * e_stride]};
    float o[3];
    gt(col, o);
    for (int i = 0; i < 3; ++i) t[i][c] = o[i];
  }
  for (int i = 0; i < 3; ++i) gt(t[i], g + i * 3);
}

}  // namespace cg::kernels::cpu::winograd
