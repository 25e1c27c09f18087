// 64-byte vectors and their in-register transpose, shared by the CPU kernels that reorder data
// between "one vector per row" and "one vector per column": the GEMM's packing (gemm.cpp) and the
// Winograd output transform of 16 tiles at once (winograd_output_transform.cpp).
#pragma once
#include <cstddef>
#include <utility>

namespace cg::kernels::cpu {

// 64-byte vectors (one AVX-512 register: 16 floats or 8 doubles). Without AVX-512 the compiler
// splits them into narrower registers; the arithmetic, and so the result, is unchanged.
template <typename T>
using Vec __attribute__((vector_size(64), aligned(alignof(T)), may_alias)) = T;

template <typename T>
constexpr int kVecLanes = int(64 / sizeof(T));

// Stage K of transpose_block on one pair of rows (a = row r, b = row r + K, bit K of r clear):
// the new row r takes a's lanes where bit K of the lane is clear and b's lanes K below where it is
// set; the new row r + K the rest. Index i >= L picks lane i - L of b. Constant indices, so each
// row is one two-source permute (vpermt2ps with AVX-512) with GCC and Clang alike.
template <typename T, int K, size_t... C>
inline void permute_pair(Vec<T>& a, Vec<T>& b, std::index_sequence<C...>) {
  constexpr int L = kVecLanes<T>;
  const Vec<T> x = a, y = b;
  a = __builtin_shufflevector(x, y, ((C & K) ? L + int(C) - K : int(C))...);
  b = __builtin_shufflevector(x, y, ((C & K) ? L + int(C) : int(C) + K)...);
}

// Transposes the L x L block held in rows[0..L) (L = Vec<T>'s lanes): afterwards rows[c][r] is
// what rows[r][c] was. Stage K (L/2, ..., 2, 1) swaps bit K of the row and column index, one
// permute per row: log2(L) stages, about 4 instructions per row where element-by-element copies
// through memory take 16 or more.
template <typename T, int K = kVecLanes<T> / 2>
inline void transpose_block(Vec<T>* rows) {
  constexpr int L = kVecLanes<T>;
#pragma GCC unroll 16
  for (int r = 0; r < L; ++r) {
    if (!(r & K)) permute_pair<T, K>(rows[r], rows[r + K], std::make_index_sequence<L>());
  }
  if constexpr (K > 1) transpose_block<T, K / 2>(rows);
}

}  // namespace cg::kernels::cpu
