// The Winograd transforms behind kernels/cpu_conv/winograd.cpp, for F(T x T, 3x3) with output tile
// edge T = 4 (Lavin & Gray's matrices, points 0, +-1, +-2) or T = 2 (points 0, +-1), one image
// plane at a time. Every function is a template on T, built for those two. Transformed tiles are
// stored "element-major": element e (0 .. (T+2)^2 - 1, row-major in the (T+2)x(T+2) tile) of tile
// t goes to out[e * e_stride + t], so that each element's values over all tiles and channels form
// one GEMM operand. Tiles are numbered t = ty * tw + tx over the plane; tile (ty, tx) covers
// output rows T*ty .. T*ty + T-1 and input rows T*ty - pad .. T*ty - pad + T+1.
// Each pass is a vertical step and a horizontal step, both written as loops across the tiles of
// a tile row over contiguous arrays, so that they vectorize.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu::winograd {

// F(T x T, 3x3)'s sizes: output tile edge, input tile edge, transform elements (one GEMM each).
template <int T>
struct Tile {
  static_assert(T == 2 || T == 4, "built for F(2x2, 3x3) and F(4x4, 3x3)");
  static constexpr int kTile = T, kInput = T + 2, kElements = kInput * kInput;
};
constexpr int kMaxElements = Tile<4>::kElements;

// Tiles along an output edge of `n` values.
inline int64_t tiles_along(int64_t n, int tile) { return (n + tile - 1) / tile; }

// Scratch for one tile row of a plane: width + 48 * (tw + 1) floats, width >= T * tw + T.
struct RowScratch {
  float* data;
  int64_t width;
};

// Input transform V = B^T d B of every (T+2)x(T+2) tile of plane [h][w] (zero outside), for tiles
// of an output of th x tw tiles with padding `pad`.
template <int T>
void input_transform(const float* plane, int64_t h, int64_t w, int64_t pad, int64_t th, int64_t tw,
                     float* out, int64_t e_stride, RowScratch scratch);

// input_transform of kLanes planes at once, planes + j * plane_stride for j < kLanes (an image's
// consecutive channels), one vector lane per plane: every vector full, where input_transform's
// loops across a tile row run part-empty or scalar (7x7: 2 tiles a row; 32x32: 8). The lanes
// stay together: element e of tile t of lane j goes to out[e * e_stride + t * tile_stride + j],
// one vector store per element and tile. Outputs of at most kLanesMaxPixels pixels (32x32: the
// padded planes, 34 x 34 vectors, stay in L2). Measured against the one-plane forms on the
// full MiniResNet's 32x32 layer (64 channels, 1 thread): forward 24.4 -> 18.6 ms, with the
// gradient transform below backward-filter 32.0 -> 17.7 ms. `next`: the 16 planes transformed
// after these (same shape), whose first rows are asked for while these finish; null if none.
constexpr int kLanes = 16;
constexpr int64_t kLanesMaxPixels = 1024;

// 16 floats, one AVX-512 register (GCC/Clang vector extension): one lane per plane.
using Lanes = float __attribute__((vector_size(64)));

// out[y * out_stride + x][j] = planes[j * plane_stride + y * w + x] for y < rows, x < cols, j < kLanes:
// pixel (y, x) of 16 planes as one vector (16 x 16 register transposes with AVX-512). The rows
// about kPrefetchFloats ahead are asked for while one is transposed: 16 planes are more streams
// than the hardware prefetcher follows, and the loads stalled on memory (perf: the transposes
// were 7% of the full network's step). Measured, 2 threads, inputs cold, alternating in one
// process: forward, backward-data and backward-filter 3-4% faster on 64 channels at 28x28, 5-6% at
// 128 x 14x14, 2-4% at 256 x 7x7.
// Past the last rows it asks for the first rows of `next` (the 16 planes read after these, same
// shape; null when there are none).
constexpr int64_t kPrefetchFloats = 32;
void gather_plane_lanes(const float* planes, int64_t plane_stride, int64_t rows, int64_t w, int64_t cols, Lanes* out,
                        int64_t out_stride, const float* next);

// The calling thread's [ph][pw] staging area for 16 planes (one vector of lanes per pixel), zero
// everywhere but rows [top, top + rows) x columns [left, left + cols), which the caller fills
// (zeroing only the border: clearing all of it was 3% of a 16-channel 28x28 forward).
Lanes* lanes_staging(int64_t ph, int64_t pw, int64_t top, int64_t rows, int64_t left, int64_t cols);
template <int T>
void input_transform_lanes(const float* planes, int64_t plane_stride, int64_t h, int64_t w, int64_t pad,
                           int64_t th, int64_t tw, float* out, int64_t e_stride, int64_t tile_stride,
                           const float* next);

// Output transform y = A^T m A + bias of 16 tiles at once, or of one tile for 16 channels (one
// vector lane each): element e of lane j at m[e * e_stride + j], bias[j] added. Reads all 16
// lanes, whether or not the caller uses them.
// output_transform_pixels: pixel (r, c) of every lane's tile in pixels[r * T + c] (lane j).
template <int T>
void output_transform_pixels(const float* m, int64_t e_stride, Lanes bias, Lanes* pixels);
// output_transform_rows, for 16 consecutive tiles of one plane: row r of the tiles in
// rows[r * T .. r * T + T), in lane order (tile j's T values at floats j * T .. j * T + T of them), so
// that tiles side by side in the plane are side by side there too.
template <int T>
void output_transform_rows(const float* m, int64_t e_stride, Lanes bias, Lanes* rows);

// The adjoint of the output transform for backward-filter: Z = A g A^T of every T x T tile of the
// output gradient plane [oh][ow] (zero outside).
template <int T>
void grad_output_transform(const float* plane, int64_t oh, int64_t ow, int64_t th, int64_t tw, float* out,
                           int64_t e_stride, RowScratch scratch);

// grad_output_transform of kLanes planes at once (planes + j * plane_stride), one vector lane per
// plane, laid out like input_transform_lanes: element e of tile t of lane j at
// out[e * e_stride + t * tile_stride + j]. Outputs of at most kLanesMaxPixels pixels. `next`: as
// input_transform_lanes's.
template <int T>
void grad_output_transform_lanes(const float* planes, int64_t plane_stride, int64_t oh, int64_t ow, int64_t th,
                                 int64_t tw, float* out, int64_t e_stride, int64_t tile_stride, const float* next);

// Sixteen 32-bit offsets, one per lane.
using OffsetLanes = int32_t __attribute__((vector_size(64)));

// U = G g G^T of 16 3x3 filters at once, one per vector lane: lane j's filter is the 9 floats at
// w + offsets[j] (row-major, or read rotated by 180 degrees), or zero where offsets[j] < 0.
// Callers build `offsets` with vector operations, so it reaches memory as one vector store that
// the transform's vector load takes straight from the store buffer: filled lane by lane (16
// scalar stores), that load waited for all 16 to retire, 40% of the transform's time (perf).
// Writes element e of lane j to u[e * e_stride + j] for the lanes whose bit is set in `store`:
// (T+2)^2 vector stores, each 16 contiguous floats of one element's matrix, where one filter at a
// time scattered 36 floats to 36 matrices (the 256-channel layer's filter transform was 9% of
// its forward; see bench/NOTES.md).
template <int T>
void filter_transform_lanes(const float* w, const OffsetLanes& offsets, bool rotated, uint32_t store, float* u,
                            int64_t e_stride);

// The adjoint of filter_transform: g[3][3] = G^T u G with u[e * e_stride].
template <int T>
void filter_transform_adjoint(const float* u, int64_t e_stride, float* g);

}  // namespace cg::kernels::cpu::winograd
