// The input half of the Winograd transforms (kernels/cpu_conv/winograd_transforms.h): V = B^T d B
//   F(4x4): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   F(2x2): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
// one plane at a time (vectorized across the tiles of a tile row) or 16 planes at a time (one
// vector lane per plane). Compiled with -ffp-contract=off (CMakeLists.txt), so that both forms
// round every multiply and add alike and give the same bits.
#include "kernels/cpu_conv/winograd_transforms.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu_conv/vec_transpose.h"

namespace cg::kernels::cpu::winograd {
namespace {

using LanesAt __attribute__((vector_size(64), aligned(4), may_alias)) = float;  // Lanes at any float address

// d (n) -> B^T d (n), n = Tile + 2, for one value (float) or 16 planes' (Lanes)
template <int Tile, class T>
inline void bt(const T d[Tile + 2], T o[Tile + 2]) {
  if constexpr (Tile == 2) {
    o[0] = d[0] - d[2];
    o[1] = d[1] + d[2];
    o[2] = d[2] - d[1];
    o[3] = d[1] - d[3];
    return;
  }
  o[0] = 4.f * d[0] - 5.f * d[2] + d[4];
  o[1] = -4.f * d[1] - 4.f * d[2] + d[3] + d[4];
  o[2] = 4.f * d[1] - 4.f * d[2] - d[3] + d[4];
  o[3] = -2.f * d[1] - d[2] + 2.f * d[3] + d[4];
  o[4] = 2.f * d[1] - d[2] - 2.f * d[3] + d[4];
  o[5] = 4.f * d[1] - 5.f * d[3] + d[5];
}

// out[x][j] = rows[j * row_stride + x] for x < n, j < kLanes: pixel x of 16 planes' rows as one
// vector (by 16 x 16 register transposes with AVX-512).
inline void gather_lanes(const float* rows, int64_t row_stride, int64_t n, Lanes* out) {
  int64_t x = 0;
#if defined(__AVX512F__)
  // Whole 16 x 16 blocks: 16 row loads, a register transpose, done where the block goes (through a
  // local block, GCC copied it out with a call to memcpy).
  for (; x + kLanes <= n; x += kLanes) {
    Vec<float>* block = reinterpret_cast<Vec<float>*>(out + x);
    for (int j = 0; j < kLanes; ++j) block[j] = *reinterpret_cast<const Vec<float>*>(rows + j * row_stride + x);
    transpose_block<float>(block);
  }
  if (x < n) {  // the last columns: masked loads, then the same
    const __mmask16 mask = __mmask16((1u << (n - x)) - 1u);
    Vec<float> block[kLanes];
    for (int j = 0; j < kLanes; ++j) block[j] = _mm512_maskz_loadu_ps(mask, rows + j * row_stride + x);
    transpose_block<float>(block);
    for (int64_t q = 0; q < n - x; ++q) out[x + q] = block[q];
  }
#else
  for (; x < n; ++x)
    for (int j = 0; j < kLanes; ++j) out[x][j] = rows[j * row_stride + x];
#endif
}

// Asks for the cache lines of n floats at rows + j * row_stride, for each of the 16 planes j.
inline void prefetch_lane_rows(const float* rows, int64_t row_stride, int64_t n) {
  for (int j = 0; j < kLanes; ++j) {
    const float* row = rows + j * row_stride;
    for (int64_t x = 0; x < n; x += 16) __builtin_prefetch(row + x);
    __builtin_prefetch(row + n - 1);
  }
}

}  // namespace

void gather_plane_lanes(const float* planes, int64_t plane_stride, int64_t rows, int64_t w, int64_t cols, Lanes* out,
                        int64_t out_stride, const float* next) {
  const int64_t ahead = std::max<int64_t>(2, (kPrefetchFloats + w - 1) / w);
  for (int64_t y = 0; y < rows; ++y) {
    if (y + ahead < rows) {
      prefetch_lane_rows(planes + (y + ahead) * w, plane_stride, cols);
    } else if (next && y + ahead - rows < rows) {
      prefetch_lane_rows(next + (y + ahead - rows) * w, plane_stride, cols);
    }
    gather_lanes(planes + y * w, plane_stride, cols, out + y * out_stride);
  }
}

Lanes* lanes_staging(int64_t ph, int64_t pw, int64_t top, int64_t rows, int64_t left, int64_t cols) {
  thread_local std::vector<Lanes> staging;
  if (staging.size() < size_t(ph * pw)) staging.resize(size_t(ph * pw));
  Lanes* s = staging.data();
  std::fill(s, s + top * pw, Lanes{});
  for (int64_t y = top; y < top + rows; ++y) {
    std::fill(s + y * pw, s + y * pw + left, Lanes{});
    std::fill(s + y * pw + left + cols, s + (y + 1) * pw, Lanes{});
  }
  std::fill(s + (top + rows) * pw, s + ph * pw, Lanes{});
  return s;
}

namespace {

// Row r of a tile row's column transforms (t: [T phases][L] for that row) along the row: B^T of
// every tile's T + 2 values, written to the T + 2 elements r * (T + 2) + k, e_stride apart.
template <int T>
inline void transform_row(const float* __restrict p0, int64_t L, int64_t tw, float* dst, int64_t e_stride) {
  const float* __restrict p1 = p0 + L;
  float *__restrict d0 = dst, *__restrict d1 = dst + e_stride, *__restrict d2 = dst + 2 * e_stride;
  float* __restrict d3 = dst + 3 * e_stride;
  if constexpr (T == 2) {
#pragma GCC ivdep
    for (int64_t l = 0; l < tw; ++l) {
      const float d[4] = {p0[l], p1[l], p0[l + 1], p1[l + 1]};
      float o[4];
      bt<2>(d, o);
      d0[l] = o[0], d1[l] = o[1], d2[l] = o[2], d3[l] = o[3];
    }
  } else {
    const float *__restrict p2 = p0 + 2 * L, *__restrict p3 = p0 + 3 * L;
    float *__restrict d4 = dst + 4 * e_stride, *__restrict d5 = dst + 5 * e_stride;
#pragma GCC ivdep
    for (int64_t l = 0; l < tw; ++l) {
      const float d[6] = {p0[l], p1[l], p2[l], p3[l], p0[l + 1], p1[l + 1]};
      float o[6];
      bt<4>(d, o);
      d0[l] = o[0], d1[l] = o[1], d2[l] = o[2], d3[l] = o[3], d4[l] = o[4], d5[l] = o[5];
    }
  }
}

}  // namespace

// Rows are kept "deinterleaved" by tile: phase k of a row holds its values T*l + k for tiles
// l = 0, 1, ..., so each step below is a loop across the tiles of a tile row over contiguous
// arrays (vector loads and stores), and the (T+2)^2 element streams are written a vector at a time.
template <int T>
void input_transform(const float* plane, int64_t h, int64_t w, int64_t pad, int64_t th, int64_t tw,
                     float* out, int64_t e_stride, RowScratch scratch) {
  constexpr int n = Tile<T>::kInput;
  const int64_t L = tw + 1, width = T * L, W = scratch.width;  // tile l reads phases at l and l + 1
  float* __restrict row = scratch.data;                  // one padded input row
  float* __restrict q = scratch.data + W;                // [n rows][T phases][L]
  float* __restrict t = scratch.data + W + n * T * L;    // B^T down the columns: [n][T][L]
  const int64_t lead = std::min(pad, width), copied = std::clamp<int64_t>(width - lead, 0, w);
  for (int64_t ty = 0; ty < th; ++ty) {
    for (int i = 0; i < n; ++i) {
      const int64_t iy = ty * T - pad + i;
      if (iy < 0 || iy >= h) {
        std::fill(q + i * T * L, q + (i + 1) * T * L, 0.f);
        continue;
      }
      std::fill(row, row + lead, 0.f);
      std::memcpy(row + lead, plane + iy * w, sizeof(float) * size_t(copied));
      std::fill(row + lead + copied, row + width, 0.f);
      for (int k = 0; k < T; ++k)
        for (int64_t l = 0; l < L; ++l) q[(i * T + k) * L + l] = row[T * l + k];
    }
    for (int64_t x = 0; x < T * L; ++x) {
      float d[n], o[n];
      for (int i = 0; i < n; ++i) d[i] = q[i * T * L + x];
      bt<T>(d, o);
      for (int r = 0; r < n; ++r) t[r * T * L + x] = o[r];
    }
    for (int r = 0; r < n; ++r) transform_row<T>(t + r * T * L, L, tw, out + r * n * e_stride + ty * tw, e_stride);
  }
}

template <int T>
void input_transform_lanes(const float* planes, int64_t plane_stride, int64_t h, int64_t w, int64_t pad,
                           int64_t th, int64_t tw, float* out, int64_t e_stride, int64_t tile_stride,
                           const float* next) {
  constexpr int n = Tile<T>::kInput;
  const int64_t ph = T * th + 2, pw = T * tw + 2;  // what the tiles read
  const int64_t rows = std::min(h, ph - pad), cols = std::min(w, pw - pad);
  Lanes* padded = lanes_staging(ph, pw, pad, rows, pad, cols);  // the planes with their zero border
  gather_plane_lanes(planes, plane_stride, rows, w, cols, padded + pad * pw + pad, pw, next);
  // The same passes as input_transform, in the same order: down the columns, then along the rows.
  for (int64_t ty = 0; ty < th; ++ty)
    for (int64_t tx = 0; tx < tw; ++tx) {
      const Lanes* corner = padded + T * ty * pw + T * tx;
      float* tile = out + (ty * tw + tx) * tile_stride;
      Lanes col[n][n];
      for (int x = 0; x < n; ++x) {
        Lanes d[n], o[n];
        for (int i = 0; i < n; ++i) d[i] = corner[i * pw + x];
        bt<T>(d, o);
        for (int r = 0; r < n; ++r) col[r][x] = o[r];
      }
      for (int r = 0; r < n; ++r) {
        Lanes o[n];
        bt<T>(col[r], o);
        for (int k = 0; k < n; ++k) *reinterpret_cast<LanesAt*>(tile + (r * n + k) * e_stride) = o[k];
      }
    }
}

template void input_transform<2>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, float*, int64_t,
                                 RowScratch);
template void input_transform<4>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, float*, int64_t,
                                 RowScratch);
template void input_transform_lanes<2>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*,
                                       int64_t, int64_t, const float*);
template void input_transform_lanes<4>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*,
                                       int64_t, int64_t, const float*);

}  // namespace cg::kernels::cpu::winograd
