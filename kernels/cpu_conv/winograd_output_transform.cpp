// The output transform of F(4x4, 3x3) (kernels/cpu_conv/winograd_transforms.h): y = A^T m A + bias,
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 -1 4 -4 0; 0 1 -1 8 -8 1]
// for 16 lanes at once (16 tiles of one channel, or one tile of 16 channels), and a 16 x 16
// register transpose to turn the 16 output vectors (one per pixel of the 4x4 tile) into 16 lanes'
// tiles (one per vector). The first form,
// one plane at a time vectorized across a tile row, ran scalar on small planes (a 14x14 plane has
// tile rows of 4 tiles) and took 40% of a 32-channel 14x14 forward.
#include "kernels/cpu_conv/vec_transpose.h"
#include "kernels/cpu_conv/winograd_transforms.h"

namespace cg::kernels::cpu::winograd {
namespace {

using V = Vec<float>;
static_assert(kVecLanes<float> == kLanes, "one lane per tile, 16 tiles, 16 pixels a tile");

// m (6) -> A^T m (4)
inline void at(const V m[6], V o[4]) {
  const V p12 = m[1] + m[2], m12 = m[1] - m[2], p34 = m[3] + m[4], m34 = m[3] - m[4];
  o[0] = m[0] + p12 + p34;
  o[1] = m12 + 2.f * m34;
  o[2] = p12 + 4.f * p34;
  o[3] = m12 + 8.f * m34 + m[5];
}

}  // namespace

void output_transform_16(const float* m, int64_t e_stride, Lanes bias, float* blocks) {
  V rows[kInput][kTile];  // A^T across each of the 6 rows of every tile
  for (int i = 0; i < kInput; ++i) {
    V v[kInput];
    for (int j = 0; j < kInput; ++j) v[j] = *reinterpret_cast<const V*>(m + (i * kInput + j) * e_stride);
    at(v, rows[i]);
  }
  // Then down the columns: pixel (r, c) of all 16 tiles in pixels[4r + c], transposed where it
  // lies so that pixels[j] is tile j's 16 pixels, row-major. Built in a local array and copied
  // out, the 16 vectors spilled to the stack and GCC turned the copy into a call to memcpy: 7% of
  // a 64-channel 28x28 forward (perf).
  V* pixels = reinterpret_cast<V*>(blocks);
  for (int c = 0; c < kTile; ++c) {
    const V v[kInput] = {rows[0][c], rows[1][c], rows[2][c], rows[3][c], rows[4][c], rows[5][c]};
    V o[kTile];
    at(v, o);
    for (int r = 0; r < kTile; ++r) pixels[r * kTile + c] = o[r] + bias;
  }
  transpose_block<float>(pixels);
}

}  // namespace cg::kernels::cpu::winograd
