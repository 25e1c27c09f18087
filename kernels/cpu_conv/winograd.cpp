// Winograd F(4x4, 3x3) convolution (kernels/cpu_conv/winograd.h). Images go in chunks of about
// kChunkTiles tiles, and each chunk is one thread's from start to end: transform its input
// planes, 36 GEMMs (one per transform element), transform the products back. Chunks are cut by
// shape only and each GEMM sums in gemm.h's fixed order, so the result does not depend on the
// thread count; and no thread waits for another inside a call (a first version with every phase
// split across threads, three barriers per chunk, ran 2x slower with 2 threads on a loaded
// machine). Backward-filter gives runs of consecutive chunks to kFilterSlots slots (a number
// fixed by the shape, not the threads); each slot adds its chunks' products in order, the slots
// are added in slot order, and the sum is transformed back once. For the widest layers it
// transforms the whole batch first and takes each element's sum in one GEMM instead
// (filter_by_element).
#include "kernels/cpu_conv/winograd.h"

#if defined(__AVX512VL__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu_conv/gemm.h"
#include "kernels/cpu_conv/winograd_transforms.h"
#include "kernels/cpu_conv/scratch.h"
#include "util/check.h"

namespace cg::kernels::cpu {
namespace {

using namespace winograd;

// Tiles (GEMM columns) per chunk: one GEMM panel (48 columns). Small chunks keep a chunk's
// transformed input and products in L2; measured (bench/NOTES.md) 48 beat 96 and 256 by 5-13%
// summed over MiniResNet's 3x3 layers and phases, most in backward-filter.
constexpr int64_t kChunkTiles = 48;

// The most output channels for which forward's products are taken transposed
// (Plan::products_channels_inner): the GEMM reads v in place while C is at most two column panels
// (gemm.cpp's NR, 48 floats, twice).
constexpr int64_t kInPlaceChannels = 64;

// Distance between consecutive transform elements' matrices: rows x cols plus one cache line.
// Without the extra line the 36 matrices sit a power of two apart for most layer shapes, and the
// transforms' 36 read or write streams fall into the same cache sets (measured: transforms 2x
// slower).
int64_t element_stride(int64_t rows, int64_t cols) { return rows * cols + 16; }

// The GEMM's column panel (gemm.cpp's NR for float): a chunk whose column count is not a multiple
// of it pays for a zero-padded partial panel in all 36 GEMMs.
constexpr int64_t kPanel = 48;

// How the images are cut into chunks.
enum class Chunking {
  smallest,        // about kChunkTiles tiles (backward-filter: its GEMMs' columns are channels)
  panel_aligned,   // up to 4x kChunkTiles when that fills the GEMMs' column panels better
};

// Images per chunk: from the smallest count reaching kChunkTiles tiles, up to 4x as many tiles,
// the count that wastes the smallest share of the last column panel (the first on ties).
int64_t images_per_chunk(int64_t tiles, int64_t n, Chunking chunking) {
  const int64_t first = std::clamp<int64_t>((kChunkTiles + tiles - 1) / tiles, 1, n);
  if (chunking == Chunking::smallest) return first;
  int64_t best = first;
  double best_waste = 1;
  for (int64_t per = first; per <= n && per * tiles <= 4 * kChunkTiles; ++per) {
    const int64_t cols = per * tiles, padded = (cols + kPanel - 1) / kPanel * kPanel;
    const double waste = double(padded - cols) / double(padded);
    if (waste < best_waste) best = per, best_waste = waste;
  }
  return best;
}

// One F(4x4, 3x3) convolution of n images [c_in][h][w] with padding `pad` into [c_out][oh][ow].
struct Plan {
  int64_t n, c_in, h, w, c_out, pad;
  int64_t oh, ow, th, tw, tiles, per, chunks;
  // How the transformed input v holds element e: [c_in][columns] (row-major, one plane's tiles
  // written at a time), or for planes of up to kLanesMaxTiles tiles in whole groups of 16
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
  Plan(int64_t n_, int64_t c_in_, int64_t h_, int64_t w_, int64_t c_out_, int64_t pad_, Chunking chunking)
      : n(n_), c_in(c_in_), h(h_), w(w_), c_out(c_out_), pad(pad_) {
    oh = h + 2 * pad - 2;
    ow = w + 2 * pad - 2;
    th = tiles_along(oh);
    tw = tiles_along(ow);
    tiles = th * tw;
    per = images_per_chunk(tiles, n, chunking);
    chunks = (n + per - 1) / per;
    channels_inner = tiles <= kLanesMaxTiles && c_in % kLanes == 0;
    grad_channels_inner = tiles <= kLanesMaxTiles && c_out % kLanes == 0;
    products_channels_inner = channels_inner && c_out % kLanes == 0 && c_out <= kInPlaceChannels;
    balanced = chunking == Chunking::panel_aligned && products_channels_inner;
  }
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
  bool balanced;
  int64_t chunk_first(int64_t ch) const { return balanced ? ch * n / chunks : ch * per; }
  int64_t chunk_count(int64_t ch) const { return std::min(n, chunk_first(ch + 1)) - chunk_first(ch); }
  int64_t max_columns() const { return per * tiles; }
  // Floats of a buffer holding 36 matrices of `rows` x max_columns().
  int64_t buffer_size(int64_t rows) const { return kElements * element_stride(rows, max_columns()); }
};

// Scratch kept on the calling thread between calls, so steady-state training allocates nothing.
float* buffer(int slot, int64_t n) {
  thread_local Scratch<float> buffers[4];
  return buffers[slot].get(size_t(n));
}

// Per-thread rows for the plane transforms.
RowScratch row_scratch(int64_t tw) {
  thread_local Scratch<float> rows;
  const int64_t width = (kTile * tw + kTile + 15) / 16 * 16;
  return {rows.get(size_t(width + 48 * (tw + 1))), width};
}

// Which of w's filters is element (r, d) of the GEMM's filter matrix [its c_out][its c_in]: w's
// [k][c] as it is, or for backward-data (rotated: c_in and c_out swapped) w's [c][k]; as the
// offset of its 9 floats in w.
struct FilterSource {
  int64_t w_in;  // w's own c_in
  bool rotated;
  // The offsets of 16 elements (r[j], d[j]) at once, -1 for those outside rows x depths.
  OffsetLanes offsets(OffsetLanes r, OffsetLanes d, int64_t rows, int64_t depths) const {
    const OffsetLanes k = rotated ? d : r, c = rotated ? r : d;
    const OffsetLanes live = (r < int32_t(rows)) & (d < int32_t(depths));
    return ((k * int32_t(w_in) + c) * 9) | ~live;
  }
};

// The lane numbers 0 .. 15 (in the packed filters' vectors lane j is row j % 8 of depth j / 8).
constexpr OffsetLanes kLaneIndex = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// u = G g G^T of every filter (rotated by 180 degrees for backward-data), transposed as the GEMM's
// [its c_in][its c_out] (Plan::products_channels_inner): 16 consecutive output channels a vector,
// element e at u + e * u_stride(...).
int64_t u_stride(int64_t c_out, int64_t c_in) { return element_stride(c_out, c_in); }
void transform_filters_transposed(const Plan& p, const float* w, bool rotated, float* u) {
  const FilterSource source{rotated ? p.c_out : p.c_in, rotated};
  const int64_t stride = u_stride(p.c_out, p.c_in), blocks = (p.c_out + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < p.c_in * blocks; ++item) {
    const int64_t d = item / blocks, r0 = item % blocks * kLanes;
    const OffsetLanes offsets = source.offsets(int32_t(r0) + kLaneIndex, OffsetLanes{} + int32_t(d), p.c_out, p.c_in);
    const uint32_t store = p.c_out - r0 >= kLanes ? 0xffffu : (1u << (p.c_out - r0)) - 1u;
    filter_transform_lanes(w, offsets, rotated, store, u + d * p.c_out + r0, stride);
  }
}

// The same filters written straight into the GEMM's packed left operand (gemm.h's pack_lhs
// layout, packed_stride apart), once per call instead of once per chunk of images: a vector is 8
// rows (its c_out) by 2 depths (its c_in), contiguous there. Rows past c_out are the panel's zero
// padding. Transforming into a row-major u (one filter's 36 values scattered to 36 matrices) and
// packing that after took 13.5% of the 256-channel 7x7 forward on one core; written packed, 8%
// (perf, 2026-11-27).
int64_t packed_stride(int64_t c_out, int64_t c_in) { return packed_lhs_size<float>(c_out, c_in); }

// The filters of the item this many ahead are asked for while one is transformed: the gathers of
// a cold item stalled the transform (a quarter of its time, perf), most of all backward-data's,
// whose items jump between rows of w. Measured on the 256-channel 7x7 layer, 2 threads, in one
// process alternating: backward-data 3.5% faster, forward 0-3%.
constexpr int64_t kPrefetchItems = 2;
inline void prefetch_filters(const float* w, const OffsetLanes& offsets) {
  for (int j = 0; j < kLanes; ++j)
    if (offsets[j] >= 0) __builtin_prefetch(w + offsets[j]);
}
constexpr int kPackedRows = kLanes / 2;
const float* transform_filters_packed(const Plan& p, const float* w, bool rotated) {
  CG_CHECK(packed_lhs_rows<float>() == kPackedRows, "a vector of filters is 8 packed rows by 2 depths");
  const FilterSource source{rotated ? p.c_out : p.c_in, rotated};
  const int64_t ps = packed_stride(p.c_out, p.c_in);
  const int64_t panels = (p.c_out + kPackedRows - 1) / kPackedRows, pairs = (p.c_in + 1) / 2;
  float* packed = buffer(3, kElements * ps);
  const int64_t items = panels * pairs;
  // Item `it`'s 16 filters: rows r0 .. r0 + 7 of depths d0 and d0 + 1.
  auto lane_offsets = [&](int64_t it) {
    return source.offsets(int32_t(it / pairs * kPackedRows) + kLaneIndex % kPackedRows,
                          int32_t(it % pairs * 2) + kLaneIndex / kPackedRows, p.c_out, p.c_in);
  };
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t r0 = item / pairs * kPackedRows, d0 = item % pairs * 2;
    const OffsetLanes offsets = lane_offsets(item);
    if (item + kPrefetchItems < items) prefetch_filters(w, lane_offsets(item + kPrefetchItems));
    // Both depths' rows, or at an odd c_in's last depth only the first (pack_lhs pads no depth).
    const uint32_t store = d0 + 1 < p.c_in ? 0xffffu : 0x00ffu;
    filter_transform_lanes(w, offsets, rotated, store, packed + packed_lhs_offset<float>(p.c_out, p.c_in, r0, d0),
                           ps);
  }
  return packed;
}

// Where a run of images' transforms go: a buffer of `cols` columns a matrix (36 matrices,
// element_stride(rows, cols) apart), the run's first image at column `col0`.
struct Columns {
  int64_t cols, col0;
};

// v (element-major, each element laid out as p.channels_inner says) = the input transforms of
// images [first, first + count) of x, at columns at.col0 onwards of a buffer of at.cols columns.
void transform_inputs(const Plan& p, const float* x, int64_t first, int64_t count, Columns at, float* v) {
  const int64_t stride = element_stride(p.c_in, at.cols);
  const RowScratch rows = row_scratch(p.tw);
  const int64_t plane = p.h * p.w;
  for (int64_t i = 0; i < count; ++i) {
    const float* image = x + (first + i) * p.c_in * plane;
    const int64_t col = at.col0 + i * p.tiles;
    if (p.channels_inner) {
      for (int64_t c = 0; c < p.c_in; c += kLanes) {
        const bool more = c + kLanes < p.c_in || i + 1 < count;  // the next 16 planes follow these
        input_transform_lanes(image + c * plane, plane, p.h, p.w, p.pad, p.th, p.tw, v + col * p.c_in + c, stride,
                              p.c_in, more ? image + (c + kLanes) * plane : nullptr);
      }
      continue;
    }
    for (int64_t c = 0; c < p.c_in; ++c)
      input_transform(image + c * plane, p.h, p.w, p.pad, p.th, p.tw, v + c * at.cols + col, stride, rows);
  }
}

// z (element-major, laid out as p.grad_channels_inner says) = the output-gradient transforms of
// images [first, first + count) of dy, placed as transform_inputs places v.
void transform_grads(const Plan& p, const float* dy, int64_t first, int64_t count, Columns at, float* z) {
  const int64_t stride = element_stride(p.c_out, at.cols), plane = p.oh * p.ow;
  const RowScratch rows = row_scratch(p.tw);
  for (int64_t i = 0; i < count; ++i) {
    const float* image = dy + (first + i) * p.c_out * plane;
    const int64_t col = at.col0 + i * p.tiles;
    if (p.grad_channels_inner) {
      for (int64_t k = 0; k < p.c_out; k += kLanes) {
        const bool more = k + kLanes < p.c_out || i + 1 < count;
        grad_output_transform_lanes(image + k * plane, plane, p.oh, p.ow, p.th, p.tw, z + col * p.c_out + k, stride,
                                    p.c_out, more ? image + (k + kLanes) * plane : nullptr);
      }
      continue;
    }
    for (int64_t k = 0; k < p.c_out; ++k)
      grad_output_transform(image + k * plane, p.oh, p.ow, p.th, p.tw, z + k * at.cols + col, stride, rows);
  }
}

// dst[0, n) = src[0, n), n <= 4: one row of an output tile (fewer columns at the plane's edge).
// One 128-bit masked store: float_rows.h's copy_floats (a loop of 512-bit masked moves) made the
// 14x14 forward 2-3% slower here (measured).
inline void copy_tile_row(const float* src, int64_t n, float* dst) {
#if defined(__AVX512VL__)
  _mm_mask_storeu_ps(dst, __mmask8((1u << n) - 1u), _mm_loadu_ps(src));
#else
  for (int64_t c = 0; c < n; ++c) dst[c] = src[c];
#endif
}

// Asks for the cache lines of dst[0, n) (rows of y the output transforms write next) for writing.
// The transforms store a tile's rows 16 bytes at a time, scattered over 4 rows of 1 or 16
// planes, and a store into a line not in cache waits for the line to be read: asked for one row of
// tiles (or 16 tiles) ahead, the forward and backward-data of the 64-channel 28x28 and
// 128-channel 14x14 layers ran 4-5% faster, the 256-channel 7x7 layer's about 1% (2 threads,
// inputs cold, alternating in one process).
inline void prefetch_for_write(const float* dst, int64_t n) {
  for (int64_t q = 0; q < n; q += 16) __builtin_prefetch(dst + q, 1);
  __builtin_prefetch(dst + n - 1, 1);
}

// Channel k of y for the chunk's images [first, ...) = the output transforms of the `cols` tiles of
// mk (row k of every element's product, ms apart) plus bias, 16 tiles at a time. Reading 16 lanes
// past the last tile stays inside the buffer (element_stride's extra line).
void transform_outputs(const Plan& p, const float* mk, int64_t ms, int64_t cols, float bias, int64_t first, int64_t k,
                       float* y) {
  alignas(64) float blocks[kLanes * kLanes];
  const int64_t plane = p.oh * p.ow;
  int64_t i = 0, ty = 0, tx = 0;  // image and tile of column c0 + j, stepped along
  for (int64_t c0 = 0; c0 < cols; c0 += kLanes) {
    // The planes of channel k that the next 16 tiles fall in.
    const int64_t last = std::min(c0 + 2 * kLanes, cols) - 1;
    for (int64_t im = (c0 + kLanes) / p.tiles; c0 + kLanes < cols && im <= last / p.tiles; ++im)
      prefetch_for_write(y + ((first + im) * p.c_out + k) * plane, plane);
    output_transform_16(mk + c0, ms, Lanes{} + bias, blocks);
    for (int64_t j = 0; j < std::min<int64_t>(kLanes, cols - c0); ++j) {
      float* dst = y + ((first + i) * p.c_out + k) * plane + kTile * (ty * p.ow + tx);
      const int64_t rows = std::min<int64_t>(kTile, p.oh - kTile * ty), width = std::min<int64_t>(kTile, p.ow - kTile * tx);
      for (int64_t r = 0; r < rows; ++r) copy_tile_row(blocks + j * kLanes + r * kTile, width, dst + r * p.ow);
      if (++tx == p.tw) tx = 0, ++ty;
      if (ty == p.th) ty = 0, ++i;
    }
  }
}

// Channels [k0, k0 + 16) of y for the chunk's images [first, ...) = the output transforms of the
// `cols` tiles of the transposed products mt ([cols][c_out] per element, ms apart; bias may be
// null), one tile at a time, its 16 channels in the vector lanes.
void transform_output_channels(const Plan& p, const float* mt, int64_t ms, int64_t cols, const float* bias,
                               int64_t first, int64_t k0, float* y) {
  alignas(64) float blocks[kLanes * kLanes];
  Lanes bias16{};
  if (bias)
    for (int j = 0; j < kLanes; ++j) bias16[j] = bias[k0 + j];
  const int64_t plane = p.oh * p.ow;
  int64_t i = 0, ty = 0, tx = 0;  // image and tile of column c, stepped along
  for (int64_t c = 0; c < cols; ++c) {
    if (tx == 0 && c + p.tw < cols) {  // a new row of tiles: ask for the next one's rows
      const int64_t ni = ty + 1 == p.th ? i + 1 : i, nty = ty + 1 == p.th ? 0 : ty + 1;
      const float* next = y + ((first + ni) * p.c_out + k0) * plane + kTile * nty * p.ow;
      for (int j = 0; j < kLanes; ++j)
        prefetch_for_write(next + j * plane, std::min<int64_t>(kTile, p.oh - kTile * nty) * p.ow);
    }
    output_transform_16(mt + c * p.c_out + k0, ms, bias16, blocks);
    float* dst = y + ((first + i) * p.c_out + k0) * plane + kTile * (ty * p.ow + tx);
    const int64_t rows = std::min<int64_t>(kTile, p.oh - kTile * ty), width = std::min<int64_t>(kTile, p.ow - kTile * tx);
    for (int j = 0; j < kLanes; ++j)
      for (int64_t r = 0; r < rows; ++r) copy_tile_row(blocks + j * kLanes + r * kTile, width, dst + j * plane + r * p.ow);
    if (++tx == p.tw) tx = 0, ++ty;
    if (ty == p.th) ty = 0, ++i;
  }
}

// The chunk's 36 products and output transforms: m [c_out][cols] = u v from the packed filters,
// or transposed (p.products_channels_inner) m^T = v u^T from the filters as they are.
void multiply_and_transform_out(const Plan& p, const float* v, const float* u, const float* bias, int64_t first,
                                int64_t cols, float* m, float* y) {
  const int64_t vs = element_stride(p.c_in, cols), ms = element_stride(p.c_out, cols);
  if (p.products_channels_inner) {
    const int64_t us = u_stride(p.c_out, p.c_in);
    for (int e = 0; e < kElements; ++e)
      gemm<float>(cols, p.c_out, p.c_in, row_major(v + e * vs, p.c_in), row_major(u + e * us, p.c_out), m + e * ms,
                  p.c_out, GemmMode::overwrite);
    for (int64_t k0 = 0; k0 < p.c_out; k0 += kLanes) transform_output_channels(p, m, ms, cols, bias, first, k0, y);
    return;
  }
  const int64_t ps = packed_stride(p.c_out, p.c_in);
  for (int e = 0; e < kElements; ++e)
    gemm_packed_lhs<float>(p.c_out, cols, p.c_in, u + e * ps, p.v_operand(v + e * vs, cols), m + e * ms, cols,
                           GemmMode::overwrite);
  for (int64_t k = 0; k < p.c_out; ++k) transform_outputs(p, m + k * cols, ms, cols, bias ? bias[k] : 0.f, first, k, y);
}

// y = conv(x, filters u) + bias: u transposed (p.products_channels_inner), else packed
// (pack_filters).
void run(const Plan& p, const float* x, const float* u, const float* bias, float* y) {
#pragma omp parallel for schedule(static) if (p.chunks > 1)
  for (int64_t ch = 0; ch < p.chunks; ++ch) {
    const int64_t first = p.chunk_first(ch), count = p.chunk_count(ch), cols = count * p.tiles;
    float* v = buffer(1, p.buffer_size(p.c_in));
    float* m = buffer(2, p.buffer_size(p.c_out));
    transform_inputs(p, x, first, count, {cols, 0}, v);
    multiply_and_transform_out(p, v, u, bias, first, cols, m, y);
  }
}

// The filters as run() takes them for plan p (the GEMM's c_out x c_in): transformed, transposed
// where the products are taken transposed, else packed.
const float* prepare_filters(const Plan& p, const float* w, bool rotated) {
  CG_CHECK(p.c_out * p.c_in * 9 <= INT32_MAX, "filters too large for 32-bit gather offsets");
  if (!p.products_channels_inner) return transform_filters_packed(p, w, rotated);
  float* u = buffer(0, kElements * u_stride(p.c_out, p.c_in));
  transform_filters_transposed(p, w, rotated, u);
  return u;
}

}  // namespace

bool winograd_supports(const Conv2dShape& s) {
  return s.kh == 3 && s.kw == 3 && s.stride == 1 && s.pad >= 0 && s.pad <= 2 && s.out_h() > 0 && s.out_w() > 0;
}

bool winograd_vectorizes_channels(const Conv2dShape& s) {
  const Plan p(s.n, s.c_in, s.h, s.w, s.c_out, s.pad, Chunking::smallest);
  return p.channels_inner && p.grad_channels_inner;
}

void winograd_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y) {
  const Plan p(s.n, s.c_in, s.h, s.w, s.c_out, s.pad, Chunking::panel_aligned);
  run(p, x, prepare_filters(p, w, false), bias, y);
}

// A forward of dy with the filters rotated and c_in, c_out swapped, and the padding 2 - pad.
void winograd_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  const Plan p(s.n, s.c_out, s.out_h(), s.out_w(), s.c_in, 2 - s.pad, Chunking::panel_aligned);
  run(p, dy, prepare_filters(p, w, true), nullptr, dx);
}

// Backward-filter's slots: up to 4, fewer when their sums (36 x c_out x c_in floats each) would
// pass kFilterSlotFloats together. The sums live in memory, not cache, for wide layers, and every
// slot is one more set of them to accumulate into and add up at the end: the 256-channel layer
// (9.4 MB a slot) ran 15-20% faster with 2 slots than with 4, on 2 threads (measured).
constexpr int64_t kFilterSlots = 4;
constexpr int64_t kFilterSlotFloats = 4 << 20;  // 16 MB

// du (slots of 36 u-shaped matrices, slot_size apart) = each slot's sum of products z v^T over its
// run of chunks, a chunk's transforms at a time (they stay in cache).
void filter_products_by_chunk(const Plan& p, const float* x, const float* dy, int64_t slots, int64_t slot_size,
                              float* du) {
  const int64_t us = u_stride(p.c_out, p.c_in);
#pragma omp parallel for schedule(static) if (slots > 1)
  for (int64_t slot = 0; slot < slots; ++slot) {
    const int64_t begin = slot * p.chunks / slots, end = (slot + 1) * p.chunks / slots;
    float* v = buffer(1, p.buffer_size(p.c_in));
    float* z = buffer(2, p.buffer_size(p.c_out));
    for (int64_t ch = begin; ch < end; ++ch) {
      const int64_t first = p.chunk_first(ch), count = p.chunk_count(ch), cols = count * p.tiles;
      const int64_t vs = element_stride(p.c_in, cols), zs = element_stride(p.c_out, cols);
      transform_inputs(p, x, first, count, {cols, 0}, v);
      transform_grads(p, dy, first, count, {cols, 0}, z);
      for (int e = 0; e < kElements; ++e)
        gemm<float>(p.c_out, p.c_in, cols, p.z_operand(z + e * zs, cols), transposed(p.v_operand(v + e * vs, cols)),
                    du + slot * slot_size + e * us, p.c_in, ch == begin ? GemmMode::overwrite : GemmMode::accumulate);
    }
  }
}

// du (36 u-shaped matrices) = z v^T over the whole batch, one GEMM per element: every image
// transformed first (the threads split the images), then the threads split the 36 elements.
// Each sum is then one pass over the tiles: no partial sums to store between chunks and add up
// after. Where the chunked form's sums outgrow the cache (wide layers on small planes: 256
// channels on 7x7 keeps 9.4 MB of them, read and written back once per chunk of 48 tiles), that
// traffic is most of its time.
void filter_products_by_element(const Plan& p, const float* x, const float* dy, float* du) {
  const int64_t cols = p.n * p.tiles, us = u_stride(p.c_out, p.c_in);
  const int64_t vs = element_stride(p.c_in, cols), zs = element_stride(p.c_out, cols);
  float* v = buffer(1, kElements * vs);  // the calling thread's scratch, shared by the team below
  float* z = buffer(2, kElements * zs);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < p.chunks; ++ch) {
      const int64_t first = p.chunk_first(ch), count = p.chunk_count(ch);
      transform_inputs(p, x, first, count, {cols, first * p.tiles}, v);
      transform_grads(p, dy, first, count, {cols, first * p.tiles}, z);
    }
#pragma omp for schedule(static)
    for (int e = 0; e < kElements; ++e)
      gemm<float>(p.c_out, p.c_in, cols, p.z_operand(z + e * zs, cols), transposed(p.v_operand(v + e * vs, cols)),
                  du + e * us, p.c_in, GemmMode::overwrite);
  }
}

// The most floats filter_products_by_element transforms at once (x's and dy's for the whole
// batch): 64 MB, 3.4x what the 256-channel 7x7 layer needs at batch 64.
constexpr int64_t kWholeBatchFloats = 16 << 20;

// Which form backward-filter takes for plan p, by shape only (so the sums' order is the same on
// any number of threads): by element where even two slots of sums would pass kFilterSlotFloats.
// Measured (cpu_conv_bench, full network, 2 threads, 2026-11-25): 256 channels on 8x8, 8.8 and
// 7.0 ms by chunk, 6.3 by element; 128 channels on 16x16 (2.4 MB a slot), 5.2 and 4.3 by chunk,
// 6.3 by element: there the chunks' sums stay in cache and the whole batch's transforms do not.
bool filter_by_element(const Plan& p) {
  const int64_t slot_size = kElements * u_stride(p.c_out, p.c_in);
  const int64_t transforms = kElements * (p.c_in + p.c_out) * p.n * p.tiles;
  return 2 * slot_size > kFilterSlotFloats && transforms <= kWholeBatchFloats;
}

void winograd_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  const Plan p(s.n, s.c_in, s.h, s.w, s.c_out, s.pad, Chunking::smallest);
  const int64_t us = u_stride(p.c_out, p.c_in), slot_size = kElements * us;
  const bool by_element = filter_by_element(p);
  const int64_t slots =
      by_element ? 1 : std::min({kFilterSlots, std::max<int64_t>(2, kFilterSlotFloats / slot_size), p.chunks});
  float* du = buffer(0, slots * slot_size);
  if (by_element) {
    filter_products_by_element(p, x, dy, du);
  } else {
    filter_products_by_chunk(p, x, dy, slots, slot_size, du);
  }
  // The slots' sums, then the transform back, a block of filters at a time: each element's run of
  // the block is read contiguously. Filter by filter, the 36 x slots reads of one filter each
  // touched a line of its own, megabytes apart for wide layers (256 channels: the reduction took
  // longer than the GEMMs).
  constexpr int64_t kBlock = 64;
  const int64_t items = p.c_out * p.c_in;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < items; b += kBlock) {
    const int64_t block = std::min(kBlock, items - b);
    // Slot by slot along the block (vector adds; with the slots innermost the loop ran scalar, 3% of
    // the full network's step), each sum in slot order as before.
    float sum[kElements][kBlock];
    for (int e = 0; e < kElements; ++e) {
      const float* first = du + e * us + b;
      std::copy(first, first + block, sum[e]);
      for (int64_t slot = 1; slot < slots; ++slot) {
        const float* part = first + slot * slot_size;
        for (int64_t i = 0; i < block; ++i) sum[e][i] += part[i];
      }
    }
    for (int64_t i = 0; i < block; ++i) filter_transform_adjoint(&sum[0][i], kBlock, dw + (b + i) * 9);
  }
  if (db) conv2d_bias_gradient(s, dy, db);
}

}  // namespace cg::kernels::cpu
