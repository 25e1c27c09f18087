// Winograd backward-filter (kernels/cpu_conv/winograd.h), F(4x4, 3x3) or F(2x2, 3x3) by the
// plan's tile. It gives runs of consecutive chunks of images to kFilterSlots slots (a number fixed
// by the shape, not the threads); each slot adds its chunks' products in order, the slots are
// added in slot order, and the sum is transformed back once. For the widest layers it transforms
// the whole batch first and takes each element's sum in one GEMM instead (filter_by_element).
// Either way the sums' order depends on the shape only, so 1 and 16 threads give the same bits.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu_conv/winograd.h"
#include "kernels/cpu_conv/winograd_plan.h"

namespace cg::kernels::cpu {
namespace {

using namespace winograd;

// Backward-filter's slots: up to 4, fewer when their sums (36 or 16 x c_out x c_in floats each) would
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
#pragma omp parallel for schedule(dynamic, 1) if (slots > 1)
  for (int64_t slot = 0; slot < slots; ++slot) {
    const int64_t begin = slot * p.chunks / slots, end = (slot + 1) * p.chunks / slots;
    float* v = buffer(1, p.buffer_size(p.c_in));
    float* z = buffer(2, p.buffer_size(p.c_out));
    for (int64_t ch = begin; ch < end; ++ch) {
      const int64_t first = p.chunk_first(ch), count = p.chunk_count(ch), cols = count * p.tiles;
      const int64_t vs = element_stride(p.c_in, cols), zs = element_stride(p.c_out, cols);
      transform_inputs(p, x, first, count, {cols, 0}, v);
      transform_grads(p, dy, first, count, {cols, 0}, z);
      for (int e = 0; e < p.t.elements; ++e)
        gemm<float>(p.c_out, p.c_in, cols, p.z_operand(z + e * zs, cols), transposed(p.v_operand(v + e * vs, cols)),
                    du + slot * slot_size + e * us, p.c_in, ch == begin ? GemmMode::overwrite : GemmMode::accumulate);
    }
  }
}

// du (one u-shaped matrix per element) = z v^T over the whole batch, one GEMM per element: every image
// transformed first (the threads split the images), then the threads split the 36 elements.
// Each sum is then one pass over the tiles: no partial sums to store between chunks and add up
// after. Where the chunked form's sums outgrow the cache (wide layers on small planes: 256
// channels on 7x7 keeps 9.4 MB of them, read and written back once per chunk of 48 tiles), that
// traffic is most of its time.
void filter_products_by_element(const Plan& p, const float* x, const float* dy, float* du) {
  const int64_t cols = p.n * p.tiles, us = u_stride(p.c_out, p.c_in);
  const int64_t vs = element_stride(p.c_in, cols), zs = element_stride(p.c_out, cols);
  float* v = buffer(1, p.t.elements * vs);  // the calling thread's scratch, shared by the team below
  float* z = buffer(2, p.t.elements * zs);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < p.chunks; ++ch) {
      const int64_t first = p.chunk_first(ch), count = p.chunk_count(ch);
      transform_inputs(p, x, first, count, {cols, first * p.tiles}, v);
      transform_grads(p, dy, first, count, {cols, first * p.tiles}, z);
    }
#pragma omp for schedule(static)
    for (int e = 0; e < p.t.elements; ++e)
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
  const int64_t slot_size = p.t.elements * u_stride(p.c_out, p.c_in);
  const int64_t transforms = p.t.elements * (p.c_in + p.c_out) * p.n * p.tiles;
  return 2 * slot_size > kFilterSlotFloats && transforms <= kWholeBatchFloats;
}

// dw = G^T (the slots' sums of du, in slot order) G, a block of filters at a time: each element's
// run of the block is read contiguously. Filter by filter, the 36 x slots reads of one filter each
// touched a line of its own, megabytes apart for wide layers (256 channels: the reduction took
// longer than the GEMMs).
void sum_slots_and_transform_back(const Plan& p, const float* du, int64_t slots, int64_t slot_size, float* dw) {
  constexpr int64_t kBlock = 64;
  const int64_t items = p.c_out * p.c_in, us = u_stride(p.c_out, p.c_in);
#pragma omp parallel for schedule(static) if (items > kSerialFilters)
  for (int64_t b = 0; b < items; b += kBlock) {
    const int64_t block = std::min(kBlock, items - b);
    // Slot by slot along the block (vector adds; with the slots innermost the loop ran scalar, 3% of
    // the full network's step), each sum in slot order as before.
    float sum[kMaxElements][kBlock];
    for (int e = 0; e < p.t.elements; ++e) {
      const float* first = du + e * us + b;
      std::copy(first, first + block, sum[e]);
      for (int64_t slot = 1; slot < slots; ++slot) {
        const float* part = first + slot * slot_size;
        for (int64_t i = 0; i < block; ++i) sum[e][i] += part[i];
      }
    }
    for (int64_t i = 0; i < block; ++i) p.t.filter_adjoint(&sum[0][i], kBlock, dw + (b + i) * 9);
  }
}

void backward_filter(int tile, const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  const Plan p(tile, s.n, s.c_in, s.h, s.w, s.c_out, s.pad, Chunking::smallest);
  const int64_t slot_size = p.t.elements * u_stride(p.c_out, p.c_in);
  const bool by_element = filter_by_element(p);
  const int64_t slots =
      by_element ? 1 : std::min({kFilterSlots, std::max<int64_t>(2, kFilterSlotFloats / slot_size), p.chunks});
  float* du = buffer(0, slots * slot_size);
  if (by_element) {
    filter_products_by_element(p, x, dy, du);
  } else {
    filter_products_by_chunk(p, x, dy, slots, slot_size, du);
  }
  sum_slots_and_transform_back(p, du, slots, slot_size, dw);
  if (db) conv2d_bias_gradient(s, dy, db);
}

}  // namespace

void winograd_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  backward_filter(4, s, x, dy, dw, db);
}

void winograd2_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db) {
  backward_filter(2, s, x, dy, dw, db);
}

}  // namespace cg::kernels::cpu
