// The Winograd plan and the chunk-wide input and output-gradient transforms
// (kernels/cpu_conv/winograd_plan.h).
#include "kernels/cpu_conv/winograd_plan.h"

#include "kernels/cpu_conv/scratch.h"
#include "util/check.h"

namespace cg::kernels::cpu::winograd {
namespace {

template <int T>
constexpr Transforms kTransforms = {T,
                                    Tile<T>::kInput,
                                    Tile<T>::kElements,
                                    input_transform<T>,
                                    input_transform_lanes<T>,
                                    output_transform_pixels<T>,
                                    output_transform_rows<T>,
                                    grad_output_transform<T>,
                                    grad_output_transform_lanes<T>,
                                    filter_transform_lanes<T>,
                                    filter_transform_adjoint<T>};

// The GEMM's column panel (gemm.cpp's NR for float): a chunk whose column count is not a multiple
// of it pays for a zero-padded partial panel in every element's GEMM.
constexpr int64_t kPanel = 48;

// Per-thread rows for the plane transforms of tile rows of tw tiles of edge `tile`.
RowScratch row_scratch(int tile, int64_t tw) {
  thread_local Scratch<float> rows;
  const int64_t width = (tile * tw + tile + 15) / 16 * 16;
  return {rows.get(size_t(width + 48 * (tw + 1))), width};
}

}  // namespace

const Transforms& transforms_for(int tile) {
  CG_CHECK(tile == 2 || tile == 4, "Winograd tiles are 2x2 or 4x4");
  return tile == 2 ? kTransforms<2> : kTransforms<4>;
}

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

Plan::Plan(int tile, int64_t n_, int64_t c_in_, int64_t h_, int64_t w_, int64_t c_out_, int64_t pad_,
           Chunking chunking)
    : t(transforms_for(tile)), n(n_), c_in(c_in_), h(h_), w(w_), c_out(c_out_), pad(pad_) {
  oh = h + 2 * pad - 2;
  ow = w + 2 * pad - 2;
  th = tiles_along(oh, tile);
  tw = tiles_along(ow, tile);
  tiles = th * tw;
  per = images_per_chunk(tiles, n, chunking);
  chunks = (n + per - 1) / per;
  const bool lanes_fit = tiles * tile * tile <= kLanesMaxPixels;
  channels_inner = lanes_fit && c_in % kLanes == 0;
  grad_channels_inner = lanes_fit && c_out % kLanes == 0;
  products_channels_inner = channels_inner && c_out % kLanes == 0 && c_out <= kInPlaceChannels;
  balanced = chunking == Chunking::panel_aligned && products_channels_inner;
}

float* buffer(int slot, int64_t n) {
  thread_local Scratch<float> buffers[4];
  return buffers[slot].get(size_t(n));
}

void transform_inputs(const Plan& p, const float* x, int64_t first, int64_t count, Columns at, float* v) {
  const int64_t stride = element_stride(p.c_in, at.cols);
  const RowScratch rows = row_scratch(p.t.tile, p.tw);
  const int64_t plane = p.h * p.w;
  for (int64_t i = 0; i < count; ++i) {
    const float* image = x + (first + i) * p.c_in * plane;
    const int64_t col = at.col0 + i * p.tiles;
    if (p.channels_inner) {
      for (int64_t c = 0; c < p.c_in; c += kLanes) {
        const bool more = c + kLanes < p.c_in || i + 1 < count;  // the next 16 planes follow these
        p.t.input_lanes(image + c * plane, plane, p.h, p.w, p.pad, p.th, p.tw, v + col * p.c_in + c, stride, p.c_in,
                        more ? image + (c + kLanes) * plane : nullptr);
      }
      continue;
    }
    for (int64_t c = 0; c < p.c_in; ++c)
      p.t.input_plane(image + c * plane, p.h, p.w, p.pad, p.th, p.tw, v + c * at.cols + col, stride, rows);
  }
}

void transform_grads(const Plan& p, const float* dy, int64_t first, int64_t count, Columns at, float* z) {
  const int64_t stride = element_stride(p.c_out, at.cols), plane = p.oh * p.ow;
  const RowScratch rows = row_scratch(p.t.tile, p.tw);
  for (int64_t i = 0; i < count; ++i) {
    const float* image = dy + (first + i) * p.c_out * plane;
    const int64_t col = at.col0 + i * p.tiles;
    if (p.grad_channels_inner) {
      for (int64_t k = 0; k < p.c_out; k += kLanes) {
        const bool more = k + kLanes < p.c_out || i + 1 < count;
        p.t.grad_lanes(image + k * plane, plane, p.oh, p.ow, p.th, p.tw, z + col * p.c_out + k, stride, p.c_out,
                       more ? image + (k + kLanes) * plane : nullptr);
      }
      continue;
    }
    for (int64_t k = 0; k < p.c_out; ++k)
      p.t.grad_plane(image + k * plane, p.oh, p.ow, p.th, p.tw, z + k * at.cols + col, stride, rows);
  }
}

}  // namespace cg::kernels::cpu::winograd
