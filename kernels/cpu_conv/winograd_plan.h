// What the Winograd convolutions (kernels/cpu_conv/winograd.cpp for forward and backward-data,
// winograd_filter.cpp for backward-filter) share: the plan of one call (tile size, chunks of
// images, how each transformed operand is laid out), the per-thread scratch, and the passes that
// transform a chunk's input planes and output-gradient planes. The tile size is a value of the plan,
// not a template: F(4x4, 3x3) and F(2x2, 3x3) run the same chunking, GEMMs and layouts, and only
// the transforms (winograd_transforms.h, one table per tile size) and the element count differ.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu_conv/gemm.h"
#include "kernels/cpu_conv/winograd_transforms.h"

namespace cg::kernels::cpu::winograd {

// One tile size's transforms, taken through pointers so that the plan's code is written once.
// Each call transforms a whole plane, 16 planes or 16 tiles, so the indirect call costs nothing
// measurable.
struct Transforms {
  int tile, input, elements;  // T, T + 2, (T + 2)^2
  decltype(&input_transform<4>) input_plane;
  decltype(&input_transform_lanes<4>) input_lanes;
  decltype(&output_transform_pixels<4>) output_pixels;
  decltype(&output_transform_rows<4>) output_rows;
  decltype(&grad_output_transform<4>) grad_plane;
  decltype(&grad_output_transform_lanes<4>) grad_lanes;
  decltype(&filter_transform_lanes<4>) filter_lanes;
  decltype(&filter_transform_adjoint<4>) filter_adjoint;
};
// The table for output tile edge `tile` (2 or 4).
const Transforms& transforms_for(int tile);

// Tiles (GEMM columns) per chunk: one GEMM panel (48 columns). Small chunks keep a chunk's
// transformed input and products in L2; measured (bench/NOTES.md) 48 beat 96 and 256 by 5-13%
// summed over MiniResNet's 3x3 layers and phases, most in backward-filter (F(4x4)).
constexpr int64_t kChunkTiles = 48;

// The most output channels for which forward's products are taken transposed
// (Plan::products_channels_inner): the GEMM reads v in place while C is at most two column panels
// (gemm.cpp's NR, 48 floats, twice).
constexpr int64_t kInPlaceChannels = 64;

// The most filters (c_out x c_in) whose per-filter passes (the filter transform, backward-filter's
// reduction and transform back) run on the calling thread alone: a few microseconds of work, less
// than a parallel region costs, and on a loaded machine every region's end waits for a thread that
// may have lost its core for a 4 ms time slice. The chunks of images and backward-filter's slots
// are handed out dynamically for the same reason (the direct kernel's already were): which thread
// runs a chunk or a slot changes no sum. Measured on the narrow network's 16-64-channel layers, 2
// threads, another build running (cpu_conv_bench, 2026-11-29): F(2x2) took 16-19 ms a call
// whatever the layer (the stem's one channel too), its work 2-6 ms.
constexpr int64_t kSerialFilters = 64 * 64;

// Distance between consecutive transform elements' matrices: rows x cols plus one cache line.
// Without the extra line the matrices sit a power of two apart for most layer shapes, and the
// transforms' 16 or 36 read or write streams fall into the same cache sets (measured: transforms
// 2x slower).
inline int64_t element_stride(int64_t rows, int64_t cols) { return rows * cols + 16; }

// The filters transformed and transposed as [its c_in][its c_out], element e at e * u_stride.
inline int64_t u_stride(int64_t c_out, int64_t c_in) { return element_stride(c_out, c_in); }

// How the images are cut into chunks.
enum class Chunking {
  smallest,        // about kChunkTiles tiles (backward-filter: its GEMMs' columns are channels)
  panel_aligned,   // up to 4x kChunkTiles when that fills the GEMMs' column panels better
};

// Images per chunk: from the smallest count reaching kChunkTiles tiles, up to 4x as many tiles,
// the count that wastes the smallest share of the last column panel (the first on ties).
int64_t images_per_chunk(int64_t tiles, int64_t n, Chunking chunking);

// One F(T x T, 3x3) convolution of n images [c_in][h][w] with padding `pad` into [c_out][oh][ow].
struct Plan {
  const Transforms& t;
  int64_t n, c_in, h, w, c_out, pad;
  int64_t oh, ow, th, tw, tiles, per, chunks;
  // How the transformed input v holds element e: [c_in][columns] (row-major, one plane's tiles
  // written at a time), or for outputs of up to kLanesMaxPixels pixels in whole groups of 16
  // channels, [columns][c_in] (channels innermost: input_transform_lanes stores a vector of 16
  // channels per tile and element; the GEMMs read it through a transposed view, same sums in the
  // same order).
  bool channels_inner;
  // The same for backward-filter's transformed output gradient z, [c_out][cols] or [cols][c_out].
  bool grad_channels_inner;
  // Forward (and backward-data, a forward) with v channels inside and up to kInPlaceChannels output
  // channels in whole groups of 16: each element's product is taken transposed, m^T [cols][c_out] =
  // v [cols][c_in] x u^T [c_in][c_out], so that the GEMM reads both operands where they are (v in
  // place, u^T as B rows) instead of packing v's columns, and the output transform takes 16
  // channels of one tile as its lanes. The same sums as m = u v, so the same bits.
  bool products_channels_inner;
  // Chunks spread evenly (see chunk_first).
  bool balanced;
  Plan(int tile, int64_t n_, int64_t c_in_, int64_t h_, int64_t w_, int64_t c_out_, int64_t pad_, Chunking chunking);
  // Element e's v (from v + e * element_stride(c_in, cols)) as the GEMM operand [c_in][cols].
  MatrixView<float> v_operand(const float* v, int64_t cols) const {
    return channels_inner ? transposed<float>(v, c_in) : row_major<float>(v, cols);
  }
  // Element e's z as the GEMM operand [c_out][cols].
  MatrixView<float> z_operand(const float* z, int64_t cols) const {
    return grad_channels_inner ? transposed<float>(z, c_out) : row_major<float>(z, cols);
  }
  // Chunk ch's images are [chunk_first(ch), chunk_first(ch) + chunk_count(ch)): `per` each and the
  // rest in the last chunk, or when balanced, the images spread evenly (n = 64 in 22 chunks: 20 of
  // 3 and 2 of 2, not 21 of 3 and 1 of 1), so that the threads' shares differ by at most a chunk of
  // the same size. Balanced only where the products are taken transposed: there the chunk's tiles
  // are the GEMM's rows, and a chunk of fewer tiles costs no partial column panel (elsewhere uneven
  // chunks ran 10-20% slower on the 256-channel 7x7 layer). Measured on the 64-channel 28x28
  // forward and backward-data, 2 threads, alternating in one process: 3% faster. The forward's
  // columns are independent, so the chunks change no bit.
  int64_t chunk_first(int64_t ch) const { return balanced ? ch * n / chunks : ch * per; }
  int64_t chunk_count(int64_t ch) const { return std::min(n, chunk_first(ch + 1)) - chunk_first(ch); }
  int64_t max_columns() const { return per * tiles; }
  // Floats of a buffer holding the elements' matrices of `rows` x max_columns().
  int64_t buffer_size(int64_t rows) const { return t.elements * element_stride(rows, max_columns()); }
};

// Scratch kept on the calling thread between calls (slots 0-3), so steady-state training
// allocates nothing.
float* buffer(int slot, int64_t n);

// Where a run of images' transforms go: a buffer of `cols` columns a matrix (one matrix per
// element, element_stride(rows, cols) apart), the run's first image at column `col0`.
struct Columns {
  int64_t cols, col0;
};

// v (element-major, each element laid out as p.channels_inner says) = the input transforms of
// images [first, first + count) of x, at columns at.col0 onwards of a buffer of at.cols columns.
void transform_inputs(const Plan& p, const float* x, int64_t first, int64_t count, Columns at, float* v);

// z (element-major, laid out as p.grad_channels_inner says) = the output-gradient transforms of
// images [first, first + count) of dy, placed as transform_inputs places v.
void transform_grads(const Plan& p, const float* dy, int64_t first, int64_t count, Columns at, float* z);

}  // namespace cg::kernels::cpu::winograd
