// The GEMM behind gemm.h, in the classic packed form: B is copied into k x NR column panels and A
// into MR x k row panels (zero-padded at the edges), and a micro-kernel keeps an MR x NR tile of C
// in vector registers while it walks k. Blocking (KC, MC) is fixed, so every element of C is the
// same sequence of fused multiply-adds whatever the caller's threading.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace cg::kernels::cpu {
namespace {

// 64-byte vectors (one AVX-512 register: 16 floats or 8 doubles). Without AVX-512 the compiler
// splits them into narrower registers; the arithmetic, and so the result, is unchanged.
template <typename T>
using Vec __attribute__((vector_size(64), aligned(alignof(T)), may_alias)) = T;

template <typename T>
struct Tile {
  static constexpr int kLanes = int(64 / sizeof(T));
  static constexpr int kMR = 8;                // rows of C per tile: each a broadcast of A
  static constexpr int kVecs = 3;              // vectors per row of the tile
  static constexpr int kNR = kVecs * kLanes;   // 8 x 3 accumulators = 24 of the 32 registers
  static constexpr int64_t kKC = 384;          // depth per pass: B panel (KC x NR) stays in L1/L2
  static constexpr int64_t kMC = 96;           // rows of A packed per pass (MC x KC in L2)
};

// The micro-kernel: out[r][:] (=) sum_p a[p*MR + r] * b[p*NR + :] over p < kc, out row-major with
// leading dimension ldo; adds to out when accumulate.
template <typename T>
inline void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T* out,
                         int64_t ldo, bool accumulate) {
  using V = Vec<T>;
  constexpr int MR = Tile<T>::kMR, NV = Tile<T>::kVecs, L = Tile<T>::kLanes, NR = Tile<T>::kNR;
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const V*>(b + p * NR + v * L);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const V av = a[p * MR + r] - V{};  // a broadcast (x - 0 is exactly x, so it folds away)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V* dst = reinterpret_cast<V*>(out + r * ldo + v * L);
      *dst = accumulate ? *dst + acc[r][v] : acc[r][v];
    }
}

// Packs rows [i0, i0 + mc) x depth [p0, p0 + kc) of A into MR-row panels, zero-padding the last.
template <typename T>
void pack_a(MatrixView<T> a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* dst) {
  constexpr int MR = Tile<T>::kMR;
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - ir);
    T* panel = dst + ir * kc;
    for (int64_t r = 0; r < MR; ++r) {
      if (r >= rows) {
        for (int64_t p = 0; p < kc; ++p) panel[p * MR + r] = T(0);
        continue;
      }
      const T* src = a.data + (i0 + ir + r) * a.row_stride + p0 * a.col_stride;
      for (int64_t p = 0; p < kc; ++p) panel[p * MR + r] = src[p * a.col_stride];
    }
  }
}

// Packs depth [p0, p0 + kc) x columns [0, n) of B into NR-column panels, zero-padding the last.
template <typename T>
void pack_b(MatrixView<T> b, int64_t n, int64_t p0, int64_t kc, T* dst) {
  constexpr int NR = Tile<T>::kNR;
  for (int64_t jr = 0; jr < n; jr += NR) {
    const int64_t cols = std::min<int64_t>(NR, n - jr);
    T* panel = dst + jr * kc;
    if (b.col_stride == 1) {  // rows of B are contiguous: copy runs
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = b.data + (p0 + p) * b.row_stride + jr;
        std::memcpy(panel + p * NR, src, sizeof(T) * size_t(cols));
        std::fill(panel + p * NR + cols, panel + (p + 1) * NR, T(0));
      }
    } else {  // columns of B are contiguous (a transposed view): read each column in turn
      for (int64_t j = 0; j < NR; ++j) {
        if (j >= cols) {
          for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = T(0);
          continue;
        }
        const T* src = b.data + p0 * b.row_stride + (jr + j) * b.col_stride;
        for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = src[p * b.row_stride];
      }
    }
  }
}

// Per-thread packing buffers, kept between calls so steady-state training allocates nothing.
template <typename T>
T* packing_buffer(int slot, size_t n) {
  thread_local std::vector<T> buffers[2];
  auto& v = buffers[slot];
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixView<T> a, MatrixView<T> b, T* c, int64_t ldc,
          GemmMode mode) {
  constexpr int MR = Tile<T>::kMR, NR = Tile<T>::kNR;
  constexpr int64_t KC = Tile<T>::kKC, MC = Tile<T>::kMC;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (mode == GemmMode::overwrite)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const int64_t n_padded = (n + NR - 1) / NR * NR;
  T* bpack = packing_buffer<T>(0, size_t(n_padded * std::min(k, KC)));
  T* apack = packing_buffer<T>(1, size_t((MC + MR) * std::min(k, KC)));
  alignas(64) T edge[MR * NR];
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t kc = std::min(KC, k - p0);
    const bool accumulate = p0 > 0 || mode == GemmMode::accumulate;
    pack_b(b, n, p0, kc, bpack);
    for (int64_t i0 = 0; i0 < m; i0 += MC) {
      const int64_t mc = std::min(MC, m - i0);
      pack_a(a, i0, mc, p0, kc, apack);
      for (int64_t jr = 0; jr < n; jr += NR) {
        const int64_t cols = std::min<int64_t>(NR, n - jr);
        for (int64_t ir = 0; ir < mc; ir += MR) {
          const int64_t rows = std::min<int64_t>(MR, mc - ir);
          T* ctile = c + (i0 + ir) * ldc + jr;
          if (rows == MR && cols == NR) {
            micro_kernel<T>(kc, apack + ir * kc, bpack + jr * kc, ctile, ldc, accumulate);
            continue;
          }
          // A partial tile: compute the full tile aside, then merge the valid part.
          micro_kernel<T>(kc, apack + ir * kc, bpack + jr * kc, edge, NR, false);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < cols; ++j)
              ctile[r * ldc + j] = accumulate ? ctile[r * ldc + j] + edge[r * NR + j] : edge[r * NR + j];
        }
      }
    }
  }
}

template void gemm<float>(int64_t, int64_t, int64_t, MatrixView<float>, MatrixView<float>, float*,
                          int64_t, GemmMode);
template void gemm<double>(int64_t, int64_t, int64_t, MatrixView<double>, MatrixView<double>,
                           double*, int64_t, GemmMode);

}  // namespace cg::kernels::cpu
