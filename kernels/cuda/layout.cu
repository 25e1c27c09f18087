// Batched transpose with an optional dtype conversion: 32x32 tiles staged in shared memory, so
// that both the reads of src rows and the writes of dst rows are coalesced. A block walks tiles
// in a grid-stride loop; the tile index is uniform over the block, so every thread reaches the
// barriers.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layout.h"

namespace cg::kernels::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;  // a block is kTile x 8 threads; each handles 4 rows of a tile

template <typename From, typename To>
__global__ void transpose_kernel(int64_t batches, int64_t rows, int64_t cols, const From* src, To* dst) {
  CG_SHARED(float, tile, [kTile][kTile + 1]);  // +1: reading a column hits 32 different banks
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t tiles = batches * row_tiles * col_tiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (row_tiles * col_tiles);
    const int64_t i0 = (t / col_tiles) % row_tiles * kTile, j0 = t % col_tiles * kTile;
    const From* s = src + b * rows * cols;
    To* d = dst + b * rows * cols;
    for (int k = threadIdx.y; k < kTile; k += kTileRowsPerPass) {
      const int64_t i = i0 + k, j = j0 + threadIdx.x;
      if (i < rows && j < cols) tile[k][threadIdx.x] = to_f32(s[i * cols + j]);
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRowsPerPass) {
      const int64_t j = j0 + k, i = i0 + threadIdx.x;
      if (i < rows && j < cols) d[j * rows + i] = from_f32<To>(tile[threadIdx.x][k]);
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

// Calls f(T*) with a null pointer of the CUDA type of a floating dtype, to carry the type.
template <typename F>
void with_cuda_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(static_cast<float*>(nullptr));
    case DType::f16: return f(static_cast<__half*>(nullptr));
    case DType::bf16: return f(static_cast<__nv_bfloat16*>(nullptr));
    default: throw Error(fmt::format("batched_transpose: no CUDA kernel for dtype {}", dtype_name(t)));
  }
}

}  // namespace

void batched_transpose(int64_t batches, int64_t rows, int64_t cols, DType src_dtype, const void* src,
                       DType dst_dtype, void* dst, Stream stream) {
  const int64_t n = batches * rows * cols;
  if (n == 0) return;
  // With one row or one column the transpose moves nothing (a one-channel image, a 1x1 filter):
  // a plain copy or conversion.
  if (rows == 1 || cols == 1) return cast(n, src_dtype, src, dst_dtype, dst, stream);
  const int64_t tiles = batches * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  const int grid = int(std::min<int64_t>(tiles, 132 * 32));  // a few waves of blocks per SM on an H100
  with_cuda_type(src_dtype, [&](auto* from_tag) {
    using From = std::remove_pointer_t<decltype(from_tag)>;
    with_cuda_type(dst_dtype, [&](auto* to_tag) {
      using To = std::remove_pointer_t<decltype(to_tag)>;
      launch_kernel(transpose_kernel<From, To>, "transpose_kernel", grid, dim3(kTile, kTileRowsPerPass), 0,
                    as_cuda(stream), batches, rows, cols, static_cast<const From*>(src), static_cast<To*>(dst));
    });
  });
}

}  // namespace cg::kernels::cuda
