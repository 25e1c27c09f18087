// F(4x4, 3x3) transform matrices (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015), applied as 1-D passes: each pass below is one matrix on one axis. The input
// transform (B^T) is in winograd_input_transform.cpp, the output transform (A^T) in
// winograd_output_transform.cpp, the output gradient's (A) in winograd_grad_transform.cpp.
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
#include "kernels/cpu/winograd_transforms.h"


namespace cg::kernels::cpu::winograd {
namespace {

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
