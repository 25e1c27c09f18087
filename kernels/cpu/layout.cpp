// Batched transpose in square tiles, so that both the rows read and the rows written stay in
// cache; tiles are independent, so they are spread over threads freely.
#include "kernels/cpu/layout.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace cg::kernels::cpu {

template <typename T>
void batched_transpose(int64_t batches, int64_t rows, int64_t cols, const T* src, T* dst) {
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t tiles = batches * row_tiles * col_tiles;
  // About 16 tiles (16K elements) per chunk: enough work to amortize a thread's start.
  parallel_for(tiles, 16, [=](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (row_tiles * col_tiles);
      const int64_t i0 = (t / col_tiles) % row_tiles * kTile, j0 = t % col_tiles * kTile;
      const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
      const T* s = src + b * rows * cols;
      T* d = dst + b * rows * cols;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) d[j * rows + i] = s[i * cols + j];
    }
  });
}

template void batched_transpose<float>(int64_t, int64_t, int64_t, const float*, float*);
template void batched_transpose<double>(int64_t, int64_t, int64_t, const double*, double*);

}  // namespace cg::kernels::cpu
