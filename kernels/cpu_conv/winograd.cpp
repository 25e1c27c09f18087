// Winograd convolution, forward and backward-data (kernels/cpu_conv/winograd.h), F(4x4, 3x3) or
// F(2x2, 3x3) by the plan's tile (kernels/cpu_conv/winograd_plan.h). Images go in chunks of about
// kChunkTiles tiles, and each chunk is one thread's from start to end: transform its input
// planes, one GEMM per transform element (36 or 16), transform the products back. Chunks are cut
// by shape only and each GEMM sums in gemm.h's fixed order, so the result does not depend on the
// thread count; and no thread waits for another inside a call (a first version with every phase
// split across threads, three barriers per chunk, ran 2x slower with 2 threads on a loaded
// machine). Backward-filter is in winograd_filter.cpp.
#include "kernels/cpu_conv/winograd.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_conv/float_rows.h"
#include "kernels/cpu_conv/scratch.h"
#include "kernels/cpu_conv/vec_transpose.h"
#include "kernels/cpu_conv/winograd_plan.h"
#include "util/check.h"

namespace cg::kernels::cpu {
namespace {

using namespace winograd;

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
void transform_filters_transposed(const Plan& p, const float* w, bool rotated, float* u) {
  const FilterSource source{rotated ? p.c_out : p.c_in, rotated};
  const int64_t stride = u_stride(p.c_out, p.c_in), blocks = (p.c_out + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static) if (p.c_out * p.c_in > kSerialFilters)
  for (int64_t item = 0; item < p.c_in * blocks; ++item) {
    const int64_t d = item / blocks, r0 = item % blocks * kLanes;
    const OffsetLanes offsets = source.offsets(int32_t(r0) + kLaneIndex, OffsetLanes{} + int32_t(d), p.c_out, p.c_in);
    const uint32_t store = p.c_out - r0 >= kLanes ? 0xffffu : (1u << (p.c_out - r0)) - 1u;
    p.t.filter_lanes(w, offsets, rotated, store, u + d * p.c_out + r0, stride);
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
  float* packed = buffer(3, p.t.elements * ps);
  const int64_t items = panels * pairs;
  // Item `it`'s 16 filters: rows r0 .. r0 + 7 of depths d0 and d0 + 1.
  auto lane_offsets = [&](int64_t it) {
    return source.offsets(int32_t(it / pairs * kPackedRows) + kLaneIndex % kPackedRows,
                          int32_t(it % pairs * 2) + kLaneIndex / kPackedRows, p.c_out, p.c_in);
  };
#pragma omp parallel for schedule(static) if (p.c_out * p.c_in > kSerialFilters)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t r0 = item / pairs * kPackedRows, d0 = item % pairs * 2;
    const OffsetLanes offsets = lane_offsets(item);
    if (item + kPrefetchItems < items) prefetch_filters(w, lane_offsets(item + kPrefetchItems));
    // Both depths' rows, or at an odd c_in's last depth only the first (pack_lhs pads no depth).
    const uint32_t store = d0 + 1 < p.c_in ? 0xffffu : 0x00ffu;
    p.t.filter_lanes(w, offsets, rotated, store, packed + packed_lhs_offset<float>(p.c_out, p.c_in, r0, d0),
                           ps);
  }
  return packed;
}

// Asks for the cache lines of dst[0, n) (rows of y the output transforms write next) for writing:
// a store into a line not in cache waits for the line to be read. Asked for one row of tiles
// ahead, the forward and backward-data of the 64-channel 28x28 and 128-channel 14x14 layers ran
// 4-5% faster, the 256-channel 7x7 layer's about 1% (2 threads, inputs cold, alternating in one
// process; measured with the tile-by-tile stores these transforms had before).
inline void prefetch_for_write(const float* dst, int64_t n) {
  for (int64_t q = 0; q < n; q += 16) __builtin_prefetch(dst + q, 1);
  __builtin_prefetch(dst + n - 1, 1);
}

// dst[0, n) = the first n lanes of v, n <= 16.
inline void store_lanes(const Lanes& v, int64_t n, float* dst) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(dst, lanes_below(n), v);
#else
  std::memcpy(dst, &v, sizeof(float) * size_t(n));
#endif
}

// The calling thread's staging for the output transforms' rows, 64-byte aligned.
Lanes* output_staging(int64_t vectors) {
  thread_local Scratch<float> staging;
  return reinterpret_cast<Lanes*>(staging.get(size_t(vectors * kLanes)));
}

// Why the output transforms stage whole rows: a tile's rows are T floats (2 for F(2x2)), and
// storing them tile by tile took 32 masked stores per 16 tiles or channels, every one to its own
// place in y, half of the transforms' time stalled behind them (perf, full network, 2026-12-02).
// Staged, y is written a row of up to 16 floats per store.

// Channel k of y for the chunk's images [first, ...) = the output transforms of the `cols` tiles of
// mk (row k of every element's product, ms apart) plus bias, 16 tiles at a time into a row of
// every pixel row of the tiles in tile order, then copied out a plane row at a time. Reading 16
// lanes past the last tile stays inside the buffer (element_stride's extra line).
void transform_outputs(const Plan& p, const float* mk, int64_t ms, int64_t cols, float bias, int64_t first, int64_t k,
                       float* y) {
  const int64_t T = p.t.tile, groups = (cols + kLanes - 1) / kLanes, row_vectors = groups * T;
  Lanes* staged = output_staging(T * row_vectors);  // pixel row r of tile c at float c * T of row r
  for (int64_t g = 0; g < groups; ++g) {
    Lanes rows[kLanes];
    p.t.output_rows(mk + g * kLanes, ms, Lanes{} + bias, rows);
    for (int64_t r = 0; r < T; ++r)
      for (int64_t v = 0; v < T; ++v) staged[r * row_vectors + g * T + v] = rows[r * T + v];
  }
  const int64_t plane = p.oh * p.ow;
  for (int64_t i = 0; i < cols / p.tiles; ++i)
    for (int64_t ty = 0; ty < p.th; ++ty)
      for (int64_t r = 0; r < std::min(T, p.oh - T * ty); ++r)
        copy_floats(reinterpret_cast<const float*>(staged + r * row_vectors) + (i * p.tiles + ty * p.tw) * T, p.ow,
                    y + ((first + i) * p.c_out + k) * plane + (T * ty + r) * p.ow);
}

// One row of `width` pixels of 16 channels (plane floats apart) from one vector per pixel (lane j:
// channel j): 16 x 16 register transposes, then one store per channel and 16 pixels.
void store_channel_rows(const Lanes* pixels, int64_t width, int64_t plane, float* dst) {
  for (int64_t x0 = 0; x0 < width; x0 += kLanes) {
    Vec<float> block[kLanes];
    for (int q = 0; q < kLanes; ++q) block[q] = pixels[x0 + q];
    transpose_block<float>(block);  // block[j]: channel j's pixels x0 .. x0 + 15
    for (int j = 0; j < kLanes; ++j) store_lanes(block[j], std::min<int64_t>(kLanes, width - x0), dst + j * plane + x0);
  }
}

// Channels [k0, k0 + 16) of y for the chunk's images [first, ...) = the output transforms of the
// `cols` tiles of the transposed products mt ([cols][c_out] per element, ms apart; bias may be
// null), one tile at a time, its 16 channels in the vector lanes, staged a row of tiles at a time
// as one vector per pixel and stored by store_channel_rows.
void transform_output_channels(const Plan& p, const float* mt, int64_t ms, int64_t cols, const float* bias,
                               int64_t first, int64_t k0, float* y) {
  Lanes bias16{};
  if (bias)
    for (int j = 0; j < kLanes; ++j) bias16[j] = bias[k0 + j];
  const int64_t plane = p.oh * p.ow, T = p.t.tile;
  const int64_t wide = (T * p.tw + kLanes - 1) / kLanes * kLanes;  // staged pixels per row (whole transposes)
  Lanes* staged = output_staging(T * wide);
  int64_t i = 0, ty = 0;  // image and tile row of column c0
  for (int64_t c0 = 0; c0 < cols; c0 += p.tw) {
    if (c0 + p.tw < cols) {  // ask for the next row of tiles' rows
      const int64_t ni = ty + 1 == p.th ? i + 1 : i, nty = ty + 1 == p.th ? 0 : ty + 1;
      const float* next = y + ((first + ni) * p.c_out + k0) * plane + T * nty * p.ow;
      for (int j = 0; j < kLanes; ++j) prefetch_for_write(next + j * plane, std::min(T, p.oh - T * nty) * p.ow);
    }
    for (int64_t tx = 0; tx < p.tw; ++tx) {
      Lanes pixels[kLanes];
      p.t.output_pixels(mt + (c0 + tx) * p.c_out + k0, ms, bias16, pixels);
      for (int64_t r = 0; r < T; ++r)
        for (int64_t c = 0; c < T; ++c) staged[r * wide + T * tx + c] = pixels[r * T + c];
    }
    float* dst = y + ((first + i) * p.c_out + k0) * plane + T * ty * p.ow;
    for (int64_t r = 0; r < std::min(T, p.oh - T * ty); ++r)
      store_channel_rows(staged + r * wide, p.ow, plane, dst + r * p.ow);
    if (++ty == p.th) ty = 0, ++i;
  }
}

// The chunk's products (one per element) and output transforms: m [c_out][cols] = u v from the packed filters,
// or transposed (p.products_channels_inner) m^T = v u^T from the filters as they are.
void multiply_and_transform_out(const Plan& p, const float* v, const float* u, const float* bias, int64_t first,
                                int64_t cols, float* m, float* y) {
  const int64_t vs = element_stride(p.c_in, cols), ms = element_stride(p.c_out, cols);
  if (p.products_channels_inner) {
    const int64_t us = u_stride(p.c_out, p.c_in);
    for (int e = 0; e < p.t.elements; ++e)
      gemm<float>(cols, p.c_out, p.c_in, row_major(v + e * vs, p.c_in), row_major(u + e * us, p.c_out), m + e * ms,
                  p.c_out, GemmMode::overwrite);
    for (int64_t k0 = 0; k0 < p.c_out; k0 += kLanes) transform_output_channels(p, m, ms, cols, bias, first, k0, y);
    return;
  }
  const int64_t ps = packed_stride(p.c_out, p.c_in);
  for (int e = 0; e < p.t.elements; ++e)
    gemm_packed_lhs<float>(p.c_out, cols, p.c_in, u + e * ps, p.v_operand(v + e * vs, cols), m + e * ms, cols,
                           GemmMode::overwrite);
  for (int64_t k = 0; k < p.c_out; ++k) transform_outputs(p, m + k * cols, ms, cols, bias ? bias[k] : 0.f, first, k, y);
}

// y = conv(x, filters u) + bias: u transposed (p.products_channels_inner), else packed
// (pack_filters).
void run(const Plan& p, const float* x, const float* u, const float* bias, float* y) {
#pragma omp parallel for schedule(dynamic, 1) if (p.chunks > 1)
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
  float* u = buffer(0, p.t.elements * u_stride(p.c_out, p.c_in));
  transform_filters_transposed(p, w, rotated, u);
  return u;
}

void forward(int tile, const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y) {
  const Plan p(tile, s.n, s.c_in, s.h, s.w, s.c_out, s.pad, Chunking::panel_aligned);
  run(p, x, prepare_filters(p, w, false), bias, y);
}

// A forward of dy with the filters rotated and c_in, c_out swapped, and the padding 2 - pad.
void backward_data(int tile, const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  const Plan p(tile, s.n, s.c_out, s.out_h(), s.out_w(), s.c_in, 2 - s.pad, Chunking::panel_aligned);
  run(p, dy, prepare_filters(p, w, true), nullptr, dx);
}

}  // namespace

bool winograd_supports(const Conv2dShape& s) {
  return s.kh == 3 && s.kw == 3 && s.stride == 1 && s.pad >= 0 && s.pad <= 2 && s.out_h() > 0 && s.out_w() > 0;
}

bool winograd_vectorizes_channels(const Conv2dShape& s) {
  const Plan p(4, s.n, s.c_in, s.h, s.w, s.c_out, s.pad, Chunking::smallest);
  return p.channels_inner && p.grad_channels_inner;
}

void winograd_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y) {
  forward(4, s, x, w, bias, y);
}

void winograd_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  backward_data(4, s, dy, w, dx);
}

void winograd2_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y) {
  forward(2, s, x, w, bias, y);
}

void winograd2_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  backward_data(2, s, dy, w, dx);
}

}  // namespace cg::kernels::cpu
