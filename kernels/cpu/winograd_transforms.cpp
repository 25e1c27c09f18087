// F(4x4, 3x3) transform matrices (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015), applied as 1-D passes: each pass below is one matrix on one axis.
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 -1 4 -4 0; 0 1 -1 8 -8 1]
#include "kernels/cpu/winograd_transforms.h"

#include <algorithm>
#include <cstring>

namespace cg::kernels::cpu::winograd {
namespace {

// d (6) -> B^T d (6)
inline void bt(const float d[6], float o[6]) {
  o[0] = 4.f * d[0] - 5.f * d[2] + d[4];
  o[1] = -4.f * d[1] - 4.f * d[2] + d[3] + d[4];
  o[2] = 4.f * d[1] - 4.f * d[2] - d[3] + d[4];
  o[3] = -2.f * d[1] - d[2] + 2.f * d[3] + d[4];
  o[4] = 2.f * d[1] - d[2] - 2.f * d[3] + d[4];
  o[5] = 4.f * d[1] - 5.f * d[3] + d[5];
}
// m (6) -> A^T m (4)
inline void at(const float m[6], float o[4]) {
  const float p12 = m[1] + m[2], m12 = m[1] - m[2], p34 = m[3] + m[4], m34 = m[3] - m[4];
  o[0] = m[0] + p12 + p34;
  o[1] = m12 + 2.f * m34;
  o[2] = p12 + 4.f * p34;
  o[3] = m12 + 8.f * m34 + m[5];
}
// y (4) -> A y (6)
inline void a(const float y[4], float o[6]) {
  const float p02 = y[0] + y[2], p13 = y[1] + y[3], q02 = y[0] + 4.f * y[2], q13 = 2.f * y[1] + 8.f * y[3];
  o[0] = y[0];
  o[1] = p02 + p13;
  o[2] = p02 - p13;
  o[3] = q02 + q13;
  o[4] = q02 - q13;
  o[5] = y[3];
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

void input_transform(const float* plane, int64_t h, int64_t w, int64_t pad, int64_t th, int64_t tw,
                     float* out, int64_t e_stride, RowScratch scratch) {
  const int64_t width = kTile * tw + 2, W = scratch.width;
  float* rows = scratch.data;       // 6 input rows, zero-padded
  float* t = scratch.data + 6 * W;  // B^T applied down the columns
  const int64_t lead = std::min(pad, width), copied = std::clamp<int64_t>(width - lead, 0, w);
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < kInput; ++i) {
      float* r = rows + i * W;
      const int64_t iy = ty * kTile - pad + i;
      if (iy < 0 || iy >= h) {
        std::fill(r, r + width, 0.f);
        continue;
      }
      std::fill(r, r + lead, 0.f);
      std::memcpy(r + lead, plane + iy * w, sizeof(float) * size_t(copied));
      std::fill(r + lead + copied, r + width, 0.f);
    }
    for (int64_t x = 0; x < width; ++x) {
      const float d[6] = {rows[x], rows[W + x], rows[2 * W + x], rows[3 * W + x], rows[4 * W + x], rows[5 * W + x]};
      float o[6];
      bt(d, o);
      for (int r = 0; r < 6; ++r) t[r * W + x] = o[r];
    }
    for (int r = 0; r < kInput; ++r) {
      float* dst = out + r * kInput * e_stride + ty * tw;
      for (int64_t l = 0; l < tw; ++l) {
        float o[6];
        bt(t + r * W + kTile * l, o);
        for (int j = 0; j < kInput; ++j) dst[j * e_stride + l] = o[j];
      }
    }
  }
}

void output_transform(const float* m, int64_t e_stride, int64_t th, int64_t tw, float bias, float* plane,
                      int64_t oh, int64_t ow, RowScratch scratch) {
  const int64_t W = scratch.width;
  float* s = scratch.data;  // 6 rows: A^T applied across each tile's columns
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < kInput; ++i) {
      const float* src = m + i * kInput * e_stride + ty * tw;
      for (int64_t l = 0; l < tw; ++l) {
        const float v[6] = {src[l], src[e_stride + l], src[2 * e_stride + l], src[3 * e_stride + l],
                            src[4 * e_stride + l], src[5 * e_stride + l]};
        at(v, s + i * W + kTile * l);
      }
    }
    float* dst = plane + ty * kTile * ow;
    if (ty * kTile + kTile <= oh) {  // a whole tile row: all four output rows
      for (int64_t x = 0; x < ow; ++x) {
        const float v[6] = {s[x], s[W + x], s[2 * W + x], s[3 * W + x], s[4 * W + x], s[5 * W + x]};
        float o[4];
        at(v, o);
        for (int r = 0; r < kTile; ++r) dst[r * ow + x] = o[r] + bias;
      }
      continue;
    }
    for (int64_t x = 0; x < ow; ++x) {  // the last, partial tile row
      const float v[6] = {s[x], s[W + x], s[2 * W + x], s[3 * W + x], s[4 * W + x], s[5 * W + x]};
      float o[4];
      at(v, o);
      for (int r = 0; ty * kTile + r < oh; ++r) dst[r * ow + x] = o[r] + bias;
    }
  }
}

void grad_output_transform(const float* plane, int64_t oh, int64_t ow, int64_t th, int64_t tw, float* out,
                           int64_t e_stride, RowScratch scratch) {
  const int64_t width = kTile * tw, W = scratch.width;
  float* rows = scratch.data;       // 4 gradient rows, zero past the edges
  float* t = scratch.data + 6 * W;  // A applied down the columns (6 rows)
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < kTile; ++i) {
      float* r = rows + i * W;
      const int64_t oy = ty * kTile + i;
      if (oy >= oh) {
        std::fill(r, r + width, 0.f);
        continue;
      }
      std::memcpy(r, plane + oy * ow, sizeof(float) * size_t(ow));
      std::fill(r + ow, r + width, 0.f);
    }
    for (int64_t x = 0; x < width; ++x) {
      const float y[4] = {rows[x], rows[W + x], rows[2 * W + x], rows[3 * W + x]};
      float o[6];
      a(y, o);
      for (int r = 0; r < 6; ++r) t[r * W + x] = o[r];
    }
    for (int r = 0; r < kInput; ++r) {
      float* dst = out + r * kInput * e_stride + ty * tw;
      for (int64_t l = 0; l < tw; ++l) {
        float o[6];
        a(t + r * W + kTile * l, o);
        for (int j = 0; j < kInput; ++j) dst[j * e_stride + l] = o[j];
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
