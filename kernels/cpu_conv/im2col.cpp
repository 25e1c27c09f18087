// Convolution as im2col + GEMM (kernels/cpu_conv/gemm.h). Images are processed in chunks: a chunk's
// columns are laid side by side so one GEMM covers several images, which keeps small late-stage
// feature maps (8x8) efficient. Chunk sizes depend only on the shape, never on the thread count, and
// backward-filter sums per-chunk partial gradients in chunk order: results are bit-identical for
// any number of threads.
#include "kernels/cpu_conv/im2col.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu_conv/float_rows.h"
#include "kernels/cpu_conv/gemm.h"
#include "kernels/cpu_conv/scratch.h"

namespace cg::kernels::cpu {
namespace {

// y[o][:] += bias[o] over rows of `cols` values.
template <typename T>
void add_bias(T* y, int64_t rows, int64_t cols, const T* bias) {
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t p = 0; p < cols; ++p) y[o * cols + p] += bias[o];
}

// A chunk's GEMM wants at least this many columns (images x output pixels) to run near peak.
constexpr int64_t kForwardColumns = 512;

int64_t images_per_chunk(const Conv2dShape& s, int64_t target_columns) {
  const int64_t hw = s.out_h() * s.out_w();
  return std::clamp<int64_t>((target_columns + hw - 1) / hw, 1, s.n);
}

bool is_pointwise(const Conv2dShape& s) {
  return s.kh == 1 && s.kw == 1 && s.stride == 1 && s.pad == 0;
}

// The output columns xo whose input column xo*stride - pad + j falls inside [0, w): [lo, hi).
struct ValidRange {
  int64_t lo, hi;
};
inline ValidRange valid_columns(const Conv2dShape& s, int64_t j) {
  const int64_t ow = s.out_w();
  // smallest xo with xo*stride >= pad - j, and smallest xo with xo*stride >= w + pad - j
  auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; };
  const int64_t lo = std::min(ceil_div(s.pad - j, s.stride), ow);
  const int64_t hi = std::clamp(ceil_div(s.w + s.pad - j, s.stride), lo, ow);
  return {lo, hi};
}

// dst[k] = src[k * stride] for k < n: by vector permutes for float32 at stride 2.
template <typename T>
void gather_strided(const T* src, int64_t n, int64_t stride, T* dst) {
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 2) return copy_even_floats(src, n, dst);
  }
  for (int64_t k = 0; k < n; ++k) dst[k] = src[k * stride];
}

// col[(c*kh + i)*kw + j][k*ohw + p] = x_k[c][oh*stride - pad + i][ow*stride - pad + j] (0 outside),
// for the `count` images starting at x (k indexes them); ld = count * ohw. Rows are copied as
// contiguous runs (stride 1) or strided gathers, with the zero borders filled separately, so the
// inner loops carry no bounds checks.
template <typename T>
void im2col(const Conv2dShape& s, const T* x, int64_t count, T* col) {
  const int64_t oh = s.out_h(), ow = s.out_w(), ohw = oh * ow, ld = count * ohw;
  const int64_t hw = s.h * s.w;
  for (int64_t k = 0; k < count; ++k) {
    const T* img = x + k * s.c_in * hw;
    for (int64_t c = 0; c < s.c_in; ++c) {
      if (k + 1 < count || c + 1 < s.c_in) prefetch_plane(img + (c + 1) * hw, hw);  // planes follow one another
      for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j) {
          T* dst = col + ((c * s.kh + i) * s.kw + j) * ld + k * ohw;
          const T* plane = img + c * hw;
          const ValidRange v = valid_columns(s, j);
          for (int64_t y = 0; y < oh; ++y) {
            const int64_t iy = y * s.stride - s.pad + i;
            T* row = dst + y * ow;
            if (iy < 0 || iy >= s.h) {
              std::fill(row, row + ow, T(0));
              continue;
            }
            std::fill(row, row + v.lo, T(0));
            std::fill(row + v.hi, row + ow, T(0));
            const T* src = plane + iy * s.w - s.pad + j;
            if (s.stride == 1) {
              std::memcpy(row + v.lo, src + v.lo, sizeof(T) * size_t(v.hi - v.lo));
            } else {
              gather_strided(src + v.lo * s.stride, v.hi - v.lo, s.stride, row + v.lo);
            }
          }
        }
    }
  }
}

// The adjoint of im2col: dx_k (zeroed by the caller) += scatter of col.
template <typename T>
void col2im(const Conv2dShape& s, const T* col, int64_t count, T* dx) {
  const int64_t oh = s.out_h(), ow = s.out_w(), ohw = oh * ow, ld = count * ohw;
  for (int64_t k = 0; k < count; ++k) {
    T* img = dx + k * s.c_in * s.h * s.w;
    for (int64_t c = 0; c < s.c_in; ++c)
      for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j) {
          const T* src = col + ((c * s.kh + i) * s.kw + j) * ld + k * ohw;
          T* plane = img + c * s.h * s.w;
          const ValidRange v = valid_columns(s, j);
          for (int64_t y = 0; y < oh; ++y) {
            const int64_t iy = y * s.stride - s.pad + i;
            if (iy < 0 || iy >= s.h) continue;
            T* dst = plane + iy * s.w - s.pad + j;
            const T* row = src + y * ow;
            if (s.stride == 1) {
              for (int64_t xo = v.lo; xo < v.hi; ++xo) dst[xo] += row[xo];
            } else {
              for (int64_t xo = v.lo; xo < v.hi; ++xo) dst[xo * s.stride] += row[xo];
            }
          }
        }
  }
}

// [count][rows][ohw] (NCHW images) <-> [rows][count * ohw] (one GEMM operand).
template <typename T>
void images_to_columns(const T* src, int64_t count, int64_t rows, int64_t ohw, T* dst) {
  for (int64_t k = 0; k < count; ++k)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * count * ohw + k * ohw, src + (k * rows + r) * ohw, sizeof(T) * ohw);
}
template <typename T>
void columns_to_images(const T* src, int64_t count, int64_t rows, int64_t ohw, T* dst) {
  for (int64_t k = 0; k < count; ++k)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + (k * rows + r) * ohw, src + r * count * ohw + k * ohw, sizeof(T) * ohw);
}

// Per-thread scratch, reused across calls so steady-state training allocates nothing here.
template <typename T>
T* scratch(int slot, size_t n) {
  thread_local Scratch<T> buffers[3];
  return buffers[slot].get(n);
}

}  // namespace

template <typename T>
void im2col_conv2d_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y) {
  const int64_t ohw = s.out_h() * s.out_w(), ckk = s.c_in * s.kh * s.kw;
  const int64_t per = images_per_chunk(s, kForwardColumns), chunks = (s.n + per - 1) / per;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t first = ch * per, count = std::min(per, s.n - first);
    const int64_t cols = count * ohw;
    const T* xin = x + first * s.c_in * s.h * s.w;
    // A 1x1 stride-1 convolution of one image is a plain GEMM on the image itself.
    const T* col = xin;
    if (!is_pointwise(s) || count > 1) {
      T* buffer = scratch<T>(0, size_t(ckk * cols));
      if (is_pointwise(s)) {
        images_to_columns(xin, count, s.c_in, ohw, buffer);
      } else {
        im2col(s, xin, count, buffer);
      }
      col = buffer;
    }
    T* out = count == 1 ? y + first * s.c_out * ohw : scratch<T>(1, size_t(s.c_out * cols));
    gemm<T>(s.c_out, cols, ckk, row_major(w, ckk), row_major(col, cols), out, cols,
            GemmMode::overwrite);
    if (bias) add_bias(out, s.c_out, cols, bias);
    if (count > 1) columns_to_images(out, count, s.c_out, ohw, y + first * s.c_out * ohw);
  }
}

template <typename T>
void im2col_conv2d_backward_data(const Conv2dShape& s, const T* dy, const T* w, T* dx) {
  const int64_t ohw = s.out_h() * s.out_w(), ckk = s.c_in * s.kh * s.kw;
  const int64_t per = images_per_chunk(s, kForwardColumns), chunks = (s.n + per - 1) / per;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t first = ch * per, count = std::min(per, s.n - first), cols = count * ohw;
    const T* g = dy + first * s.c_out * ohw;
    if (count > 1) {
      T* gcols = scratch<T>(1, size_t(s.c_out * cols));
      images_to_columns(g, count, s.c_out, ohw, gcols);
      g = gcols;
    }
    T* out = dx + first * s.c_in * s.h * s.w;
    T* col = scratch<T>(0, size_t(ckk * cols));
    gemm<T>(ckk, cols, s.c_out, transposed(w, ckk), row_major(g, cols), col, cols,
            GemmMode::overwrite);
    if (is_pointwise(s)) {
      columns_to_images(col, count, s.c_in, ohw, out);
    } else {
      std::fill(out, out + count * s.c_in * s.h * s.w, T(0));
      col2im(s, col, count, out);
    }
  }
}

// Backward-filter accumulates over the batch. Work is split into a fixed number of slots (not
// threads); each slot sums its chunks' products in order with GEMM's += form, and the slots'
// partial gradients are added in slot order at the end.
constexpr int64_t kFilterSlots = 8;

template <typename T>
void im2col_conv2d_backward_filter(const Conv2dShape& s, const T* x, const T* dy, T* dw, T* db) {
  const int64_t ohw = s.out_h() * s.out_w(), ckk = s.c_in * s.kh * s.kw;
  const int64_t per = images_per_chunk(s, kForwardColumns), chunks = (s.n + per - 1) / per;
  const int64_t slots = std::min(kFilterSlots, chunks), wsize = s.c_out * ckk;
  const int64_t chunks_per_slot = (chunks + slots - 1) / slots;
  std::vector<T> partial(size_t(slots > 1 ? slots * wsize : 0));
#pragma omp parallel for schedule(static) if (slots > 1)
  for (int64_t slot = 0; slot < slots; ++slot) {
    T* slot_dw = slots > 1 ? partial.data() + slot * wsize : dw;
    const int64_t ch_end = std::min(chunks, (slot + 1) * chunks_per_slot);
    for (int64_t ch = slot * chunks_per_slot; ch < ch_end; ++ch) {
      const int64_t first = ch * per, count = std::min(per, s.n - first), cols = count * ohw;
      const T* xin = x + first * s.c_in * s.h * s.w;
      const T* g = dy + first * s.c_out * ohw;
      if (count > 1) {
        T* gcols = scratch<T>(1, size_t(s.c_out * cols));
        images_to_columns(g, count, s.c_out, ohw, gcols);
        g = gcols;
      }
      T* col = scratch<T>(0, size_t(ckk * cols));
      if (is_pointwise(s)) {
        images_to_columns(xin, count, s.c_in, ohw, col);
      } else {
        im2col(s, xin, count, col);
      }
      const bool first_in_slot = ch == slot * chunks_per_slot;
      gemm<T>(s.c_out, ckk, cols, row_major(g, cols), transposed<T>(col, cols), slot_dw, ckk,
              first_in_slot ? GemmMode::overwrite : GemmMode::accumulate);
    }
  }
  if (slots > 1) {
    parallel_for(wsize, 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T acc = partial[size_t(i)];
        for (int64_t sl = 1; sl < slots; ++sl) acc += partial[size_t(sl * wsize + i)];
        dw[i] = acc;
      }
    });
  }
  if (db) conv2d_bias_gradient(s, dy, db);
}

#define CG_INSTANTIATE(T)                                                                      \
  template void im2col_conv2d_forward<T>(const Conv2dShape&, const T*, const T*, const T*, T*); \
  template void im2col_conv2d_backward_data<T>(const Conv2dShape&, const T*, const T*, T*);     \
  template void im2col_conv2d_backward_filter<T>(const Conv2dShape&, const T*, const T*, T*, T*);
CG_INSTANTIATE(float)
CG_INSTANTIATE(double)
#undef CG_INSTANTIATE

}  // namespace cg::kernels::cpu
