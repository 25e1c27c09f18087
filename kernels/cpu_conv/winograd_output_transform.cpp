// The output transforms of F(4x4, 3x3) and F(2x2, 3x3) (kernels/cpu_conv/winograd_transforms.h):
// y = A^T m A + bias,
//   F(4x4): A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 -1 4 -4 0; 0 1 -1 8 -8 1]
//   F(2x2): A^T = [1 1 1 0; 0 1 -1 -1]
// for 16 lanes at once (16 tiles of one channel, or one tile of 16 channels), then a transpose to
// turn the T*T output vectors (one per pixel of the tile) into 16 lanes' tiles: for F(4x4) a
// 16 x 16 register transpose. The first form,
// one plane at a time vectorized across a tile row, ran scalar on small planes (a 14x14 plane has
// tile rows of 4 tiles) and took 40% of a 32-channel 14x14 forward.
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

}  // namespace

template <int T>
void output_transform_16(const float* m, int64_t e_stride, Lanes bias, float* blocks) {
  constexpr int n = Tile<T>::kInput;
  V rows[n][T];  // A^T across each of the T + 2 rows of every tile
  for (int i = 0; i < n; ++i) {
    V v[n];
    for (int j = 0; j < n; ++j) v[j] = *reinterpret_cast<const V*>(m + (i * n + j) * e_stride);
    at<T>(v, rows[i]);
  }
  // Then down the columns: pixel (r, c) of all 16 tiles in pixels[T*r + c]. For F(4x4), transposed
  // where it lies so that pixels[j] is tile j's 16 pixels, row-major. Built in a local array and
  // copied out, the 16 vectors spilled to the stack and GCC turned the copy into a call to memcpy:
  // 7% of a 64-channel 28x28 forward (perf).
  alignas(64) V local[T == 4 ? 1 : T * T];
  V* pixels = T == 4 ? reinterpret_cast<V*>(blocks) : local;
  for (int c = 0; c < T; ++c) {
    V v[n];
    for (int i = 0; i < n; ++i) v[i] = rows[i][c];
    V o[T];
    at<T>(v, o);
    for (int r = 0; r < T; ++r) pixels[r * T + c] = o[r] + bias;
  }
  if constexpr (T == 4) {
    transpose_block<float>(pixels);
  } else {  // 4 pixels of 16 lanes: lane j's tile to blocks[4j .. 4j + 4)
    for (int j = 0; j < kLanes; ++j)
      for (int q = 0; q < T * T; ++q) blocks[j * T * T + q] = local[q][j];
  }
}

template void output_transform_16<2>(const float*, int64_t, Lanes, float*);
template void output_transform_16<4>(const float*, int64_t, Lanes, float*);

}  // namespace cg::kernels::cpu::winograd
