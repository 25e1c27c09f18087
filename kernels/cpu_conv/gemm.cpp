// The GEMM behind gemm.h, in the classic packed form: B is copied into k x NR column panels and A
// into MR x k row panels (zero-padded at the edges), and a micro-kernel keeps an MR x NR tile of C
// in vector registers while it walks k. Blocking (KC, MC) is fixed, so every element of C is the
// same sequence of fused multiply-adds whatever the caller's threading. Where packing would cost
// as much as the product (an operand used once), it is read in place instead: same sums.
// Exactness: the micro-kernel restarts its accumulators every kChain depths and adds each chain's
// sum to C in order, so C = ((C0 + s1) + s2) + ... with no chain longer than 32 products. One
// chain through a 256-channel Winograd product left F(2x2)'s backward-data 2.3x PyTorch float32's
// error against float64; chains of 32 bring it to 1.0x, and im2col's 1x1 layers from 1.65-1.89x
// to 0.81-0.93x (bench/NOTES.md, "Issue 41 (session 33)").
#include "kernels/cpu_conv/gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/cpu_conv/vec_transpose.h"
#include "kernels/cpu_conv/scratch.h"

namespace cg::kernels::cpu {
namespace {

template <typename T>
struct Tile {
  static constexpr int kLanes = kVecLanes<T>;
  static constexpr int kMR = 8;                // rows of C per tile: each a broadcast of A
#if defined(__AVX512F__)
  static constexpr int kVecs = 3;              // vectors per row of the tile
#else
  // AVX2 has 16 registers of 8 floats: 8 x 3 vectors of 16 floats (48 registers) spilled on every
  // multiply-add and ran at a quarter of the core's peak; 8 x 1 takes 16 registers and spills
  // only the loaded row of B. Each element of C sums the same terms in the same order either way.
  static constexpr int kVecs = 1;
#endif
  static constexpr int kNR = kVecs * kLanes;   // AVX-512: 8 x 3 accumulators = 24 of the 32 registers
  static constexpr int64_t kKC = 384;          // depth per pass: B panel (KC x NR) stays in L1/L2
  static constexpr int64_t kChain = 32;        // depths an accumulator sums before it is added to C
  static constexpr int64_t kMC = 96;           // rows of A packed per pass (MC x KC in L2)
};

// How the micro-kernel reads A's element (r, p): packed (a[p * MR + r], one MR-row panel), or in
// place from a row-major A (a[r * lda + p]) or a column-major one (a[p * lda + r]).
enum class ALayout { packed, rows, columns };

template <typename T, ALayout AL>
inline T a_element(const T* a, int64_t lda, int r, int64_t p) {
  constexpr int MR = Tile<T>::kMR;
  if constexpr (AL == ALayout::packed) return a[p * MR + r];
  if constexpr (AL == ALayout::rows) return a[r * lda + p];
  return a[p * lda + r];
}

// The micro-kernel: out[r][:NV * L] (=) sum_p a(r, p) * b[p*ldb + :] over p < kc (b: a packed
// panel with ldb = NR, or B's own rows), out row-major with leading dimension ldo; adds to out
// when accumulate. NV < kVecs runs a narrower tile (the last columns of a matrix whose width is
// not a multiple of NR) without computing the padding: each output's sum is the same sequence of
// multiply-adds whatever NV and whatever A's layout.
template <typename T, int NV, ALayout AL>
__attribute__((always_inline)) inline void micro_kernel_chain(int64_t kc, const T* __restrict a, int64_t lda,
                                                              const T* __restrict b, int64_t ldb, T* out, int64_t ldo,
                                                              bool accumulate) {
  using V = Vec<T>;
  constexpr int MR = Tile<T>::kMR, L = Tile<T>::kLanes;
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const V*>(b + p * ldb + v * L);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const V av = a_element<T, AL>(a, lda, r, p) - V{};  // a broadcast (x - 0 is exactly x, so it folds away)
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

// A's element (0, p0) in its layout.
template <typename T, ALayout AL>
inline const T* a_at_depth(const T* a, int64_t lda, int64_t p0) {
  if constexpr (AL == ALayout::packed) return a + p0 * Tile<T>::kMR;
  if constexpr (AL == ALayout::rows) return a + p0;
  return a + p0 * lda;
}

// `one_chain(depth, a, b, accumulate)` over depth kc in chains of at most kChain, each added to
// the output in turn. A depth of one chain calls it once, with no loop around it: the loop, though
// it ran once, cost 15-20% on the narrow network's 16-deep GEMMs.
template <typename T, ALayout AL, typename OneChain>
__attribute__((always_inline)) inline void in_chains(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb,
                                                     bool accumulate, OneChain one_chain) {
  constexpr int64_t chain = Tile<T>::kChain;
  if (kc <= chain) return one_chain(kc, a, b, accumulate);
  for (int64_t p0 = 0; p0 < kc; p0 += chain)
    one_chain(std::min(chain, kc - p0), a_at_depth<T, AL>(a, lda, p0), b + p0 * ldb, accumulate || p0 > 0);
}

template <typename T, int NV, ALayout AL>
__attribute__((always_inline)) inline void micro_kernel(int64_t kc, const T* __restrict a, int64_t lda,
                                                        const T* __restrict b, int64_t ldb, T* out, int64_t ldo,
                                                        bool accumulate) {
  in_chains<T, AL>(kc, a, lda, b, ldb, accumulate, [&](int64_t depth, const T* ap, const T* bp, bool add) {
    micro_kernel_chain<T, NV, AL>(depth, ap, lda, bp, ldb, out, ldo, add);
  });
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// micro_kernel<float, 1, AL> for AVX2: its 8 rows x 16 floats are 16 registers of 8 floats, all
// AVX2 has, so the row of B and each broadcast of A spilled an accumulator (perf, 2026-11-28:
// 4-6 GFLOP/s against a 77-91 GFLOP/s core). The tile runs as two halves of 8 columns, each the
// whole depth with 8 accumulators, A's panel read twice (from L1). Every element of C still sums
// the same products in the same order, one multiply-add each: the same bits.
template <ALayout AL>
inline void micro_kernel_avx2_chain(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b,
                                    int64_t ldb, float* out, int64_t ldo, bool accumulate) {
  constexpr int MR = Tile<float>::kMR;
  for (int half = 0; half < 2; ++half) {
    const float* bh = b + half * 8;
    __m256 acc[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; ++p) {
      const __m256 bv = _mm256_loadu_ps(bh + p * ldb);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a_element<float, AL>(a, lda, r, p)), bv, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      float* dst = out + r * ldo + half * 8;
      _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(_mm256_loadu_ps(dst), acc[r]) : acc[r]);
    }
  }
}
template <ALayout AL>
inline void micro_kernel_avx2(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b,
                              int64_t ldb, float* out, int64_t ldo, bool accumulate) {
  in_chains<float, AL>(kc, a, lda, b, ldb, accumulate, [&](int64_t depth, const float* ap, const float* bp, bool add) {
    micro_kernel_avx2_chain<AL>(depth, ap, lda, bp, ldb, out, ldo, add);
  });
}
#endif

// micro_kernel with the fewest vectors per row that cover `vecs` (1 to kVecs).
template <typename T, ALayout AL>
inline void micro_kernel_of_width(int vecs, int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T* out,
                                  int64_t ldo, bool accumulate) {
  static_assert(Tile<T>::kVecs == 3 || Tile<T>::kVecs == 1, "one case per width");
  if constexpr (Tile<T>::kVecs == 3) {
    if (vecs == 3) micro_kernel<T, 3, AL>(kc, a, lda, b, ldb, out, ldo, accumulate);
    if (vecs == 2) micro_kernel<T, 2, AL>(kc, a, lda, b, ldb, out, ldo, accumulate);
  }
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (vecs == 1) micro_kernel_avx2<AL>(kc, a, lda, b, ldb, out, ldo, accumulate);
    return;
  }
#endif
  if (vecs == 1) micro_kernel<T, 1, AL>(kc, a, lda, b, ldb, out, ldo, accumulate);
}

// Stores lanes [H * MR, (H + 1) * MR) of v at dst (one A-panel row of MR values), as one
// shuffle and one store (element by element, GCC went through the stack).
template <typename T, int H, size_t... I>
inline void store_part(const Vec<T>& v, T* dst, std::index_sequence<I...>) {
  using Part __attribute__((vector_size(sizeof...(I) * sizeof(T)), aligned(alignof(T)), may_alias)) = T;
  *reinterpret_cast<Part*>(dst) = __builtin_shufflevector(v, v, (H * int(sizeof...(I)) + int(I))...);
}

// pack_a for a transposed view of A (columns contiguous): a panel's MR rows at one depth are one
// run, copied whole, the last panel's missing rows zero-filled.
template <typename T>
void pack_a_column_major(MatrixView<T> a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* dst) {
  constexpr int MR = Tile<T>::kMR;
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - ir);
    T* panel = dst + ir * kc;
    for (int64_t p = 0; p < kc; ++p) {
      const T* src = a.data + i0 + ir + (p0 + p) * a.col_stride;
      if (rows == MR) {
        std::memcpy(panel + p * MR, src, sizeof(T) * MR);
      } else {
        std::copy(src, src + rows, panel + p * MR);
        std::fill(panel + p * MR + rows, panel + (p + 1) * MR, T(0));
      }
    }
  }
}

// pack_a's vector part for a row-major A: rows [0, rows) x depth [0, depth) (multiples of L), L
// rows by L columns at a time through transpose_block; each block of L rows fills one or two
// MR-row panels.
template <typename T>
void pack_a_blocks(MatrixView<T> a, int64_t i0, int64_t rows, int64_t p0, int64_t depth, int64_t kc, T* dst) {
  constexpr int MR = Tile<T>::kMR, L = Tile<T>::kLanes;
  for (int64_t ir = 0; ir < rows; ir += L)
    for (int64_t pb = 0; pb < depth; pb += L) {
      Vec<T> block[L];
#pragma GCC unroll 16
      for (int t = 0; t < L; ++t)
        block[t] = *reinterpret_cast<const Vec<T>*>(a.data + (i0 + ir + t) * a.row_stride + p0 + pb);
      transpose_block<T>(block);  // block[q] = column pb + q of rows ir .. ir + L
#pragma GCC unroll 16
      for (int q = 0; q < L; ++q) {
        store_part<T, 0>(block[q], dst + ir * kc + (pb + q) * MR, std::make_index_sequence<MR>());
        if constexpr (L / MR == 2)
          store_part<T, 1>(block[q], dst + (ir + MR) * kc + (pb + q) * MR, std::make_index_sequence<MR>());
      }
    }
}

// pack_a's element-by-element part: every element of rows [0, mc) x depth [0, kc) that
// pack_a_blocks did not copy (rows below vector_rows start at vector_depth), and zeros for the
// last panel's missing rows.
template <typename T>
void pack_a_elements(MatrixView<T> a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t vector_rows,
                     int64_t vector_depth, T* dst) {
  constexpr int MR = Tile<T>::kMR;
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - ir);
    T* panel = dst + ir * kc;
    const int64_t p_begin = ir < vector_rows ? vector_depth : 0;
    for (int64_t r = 0; r < MR; ++r) {
      if (r >= rows) {
        for (int64_t p = 0; p < kc; ++p) panel[p * MR + r] = T(0);
        continue;
      }
      const T* src = a.data + (i0 + ir + r) * a.row_stride + p0 * a.col_stride;
      for (int64_t p = p_begin; p < kc; ++p) panel[p * MR + r] = src[p * a.col_stride];
    }
  }
}

// Packs rows [i0, i0 + mc) x depth [p0, p0 + kc) of A into MR-row panels, zero-padding the last.
// A row-major A is copied L rows by L columns at a time through transpose_block (whole blocks
// only; the rest element by element).
template <typename T>
void pack_a(MatrixView<T> a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* dst) {
  constexpr int MR = Tile<T>::kMR, L = Tile<T>::kLanes;
  static_assert(L == MR || L == 2 * MR, "a block of L rows fills one or two panels");
  if (a.row_stride == 1 && a.col_stride != 1) {
    pack_a_column_major(a, i0, mc, p0, kc, dst);
    return;
  }
  int64_t vector_rows = 0;  // rows [0, vector_rows) x depth [0, vector_depth) go by blocks
  const int64_t vector_depth = a.col_stride == 1 ? kc / L * L : 0;
  if (vector_depth > 0) {
    vector_rows = mc / L * L;
    pack_a_blocks(a, i0, vector_rows, p0, vector_depth, kc, dst);
  }
  pack_a_elements(a, i0, mc, p0, kc, vector_rows, vector_depth, dst);
}

// Packs depth [p0, p0 + kc) x columns [0, n) of B into NR-column panels, zero-padding the last.
template <typename T>
void pack_b(MatrixView<T> b, int64_t n, int64_t p0, int64_t kc, T* dst) {
  constexpr int NR = Tile<T>::kNR, L = Tile<T>::kLanes;
  for (int64_t jr = 0; jr < n; jr += NR) {
    const int64_t cols = std::min<int64_t>(NR, n - jr);
    T* panel = dst + jr * kc;
    if (b.col_stride == 1) {  // rows of B are contiguous: copy runs
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = b.data + (p0 + p) * b.row_stride + jr;
        std::memcpy(panel + p * NR, src, sizeof(T) * size_t(cols));
        std::fill(panel + p * NR + cols, panel + (p + 1) * NR, T(0));
      }
      continue;
    }
    // Columns of B are contiguous (a transposed view): whole L x L blocks through transpose_block,
    // the rest element by element.
    const int64_t vector_cols = b.row_stride == 1 ? cols / L * L : 0, vector_depth = kc / L * L;
    for (int64_t jb = 0; jb < vector_cols; jb += L)
      for (int64_t pb = 0; pb < vector_depth; pb += L) {
        Vec<T> block[L];
#pragma GCC unroll 16
        for (int t = 0; t < L; ++t)
          block[t] = *reinterpret_cast<const Vec<T>*>(b.data + (p0 + pb) + (jr + jb + t) * b.col_stride);
        transpose_block<T>(block);  // block[q] = row p0 + pb + q of columns jb .. jb + L
#pragma GCC unroll 16
        for (int q = 0; q < L; ++q) *reinterpret_cast<Vec<T>*>(panel + (pb + q) * NR + jb) = block[q];
      }
    for (int64_t j = 0; j < NR; ++j) {
      if (j >= cols) {
        for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = T(0);
        continue;
      }
      const T* src = b.data + p0 * b.row_stride + (jr + j) * b.col_stride;
      for (int64_t p = j < vector_cols ? vector_depth : 0; p < kc; ++p) panel[p * NR + j] = src[p * b.row_stride];
    }
  }
}

// Per-thread packing buffers, kept between calls so steady-state training allocates nothing.
template <typename T>
T* packing_buffer(int slot, size_t n) {
  thread_local Scratch<T> buffers[2];
  return buffers[slot].get(n);
}

// Where block (p0, i0) of a packed A sits in pack_lhs's layout: depth blocks one after another,
// each holding all of A's rows (padded to MR) as MR-row panels of that block's depth.
template <typename T>
int64_t packed_block_offset(int64_t m, int64_t p0, int64_t i0, int64_t kc) {
  constexpr int MR = Tile<T>::kMR;
  return p0 * ((m + MR - 1) / MR * MR) + i0 * kc;
}

// One MR x NR tile of C (rows x cols of it valid) from A's rows (an MR-row panel, or MR rows in
// place lda apart) and a B panel over depth kc: a whole tile straight into C, a partial one
// computed aside (from C's valid part, so it sums in the whole tile's order) and copied back. In
// place, all MR rows must be A's.
template <typename T, ALayout AL>
inline void multiply_tile(int64_t rows, int64_t cols, int64_t kc, const T* a, int64_t lda, const T* bpanel,
                          int64_t ldb, T* ctile, int64_t ldc, bool accumulate) {
  constexpr int MR = Tile<T>::kMR, NR = Tile<T>::kNR, L = Tile<T>::kLanes;
  const int vecs = int((cols + L - 1) / L);  // the tile's width in vectors
  if (rows == MR && cols == vecs * L) {
    micro_kernel_of_width<T, AL>(vecs, kc, a, lda, bpanel, ldb, ctile, ldc, accumulate);
    return;
  }
  alignas(64) T edge[MR * NR];
  if (kc <= Tile<T>::kChain) {  // one chain: C + s, whether C is added in the kernel or here
    micro_kernel_of_width<T, AL>(vecs, kc, a, lda, bpanel, ldb, edge, NR, false);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j)
        ctile[r * ldc + j] = accumulate ? ctile[r * ldc + j] + edge[r * NR + j] : edge[r * NR + j];
    return;
  }
  std::fill(edge, edge + MR * NR, T(0));
  if (accumulate)
    for (int64_t r = 0; r < rows; ++r) std::copy(ctile + r * ldc, ctile + r * ldc + cols, edge + r * NR);
  micro_kernel_of_width<T, AL>(vecs, kc, a, lda, bpanel, ldb, edge, NR, accumulate);
  for (int64_t r = 0; r < rows; ++r) std::copy(edge + r * NR, edge + r * NR + cols, ctile + r * ldc);
}

// The width of the next column panel of C, `rest` columns from its end: NR, or what is left. B
// read in place can be split anywhere, and there 4 vectors left go as 2 + 2 instead of 3 + 1 (64
// channels: 32 + 32, not 48 + 16): an 8 x 1 tile has 8 accumulators, just the multiply-adds in
// flight that two FMA pipes of latency 4 need, and one load of B for each 8 of them. Each element
// of C sums the same products in the same order whatever its tile.
template <typename T>
inline int64_t panel_columns(int64_t rest, bool b_in_place) {
  constexpr int NR = Tile<T>::kNR, L = Tile<T>::kLanes;
  if constexpr (Tile<T>::kVecs == 3)
    if (b_in_place && rest == NR + L) return 2 * L;
  return std::min<int64_t>(NR, rest);
}

// Rows [0, mc) of C (c points at the first) from A's rows over depth kc (packed: MC x kc in
// MR-row panels; in place: rows lda apart, mc a multiple of MR) and B's kc rows, with leading
// dimension ldb: B itself from b_panels when b_in_place, else NR-column panels kc x NR each, column
// panel jr at b_panels + jr * kc.
template <typename T, ALayout AL>
void multiply_block(int64_t mc, int64_t n, int64_t kc, const T* a, int64_t lda, const T* b_panels, bool b_in_place,
                    int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  constexpr int MR = Tile<T>::kMR;
  const int64_t b_panel_stride = b_in_place ? 1 : kc;
  for (int64_t jr = 0, cols = 0; jr < n; jr += cols) {
    cols = panel_columns<T>(n - jr, b_in_place);
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t rows = std::min<int64_t>(MR, mc - ir);
      const T* arows = AL == ALayout::packed ? a + ir * kc : AL == ALayout::rows ? a + ir * lda : a + ir;
      multiply_tile<T, AL>(rows, cols, kc, arows, lda, b_panels + jr * b_panel_stride, ldb, c + ir * ldc + jr, ldc,
                           accumulate);
    }
  }
}

// C's overwrite with zeros when the depth is empty (accumulate leaves it as it is).
template <typename T>
void gemm_empty_depth(int64_t m, int64_t n, T* c, int64_t ldc, GemmMode mode) {
  if (mode == GemmMode::overwrite)
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
}

// How gemm_blocks reads B: packed into bpack, or in place (bpack null) when its rows are
// contiguous, every column panel is a whole number of vectors (no tile reads past a row), and one
// depth pass covers it. Small Winograd backward-filter GEMMs (32 x 32 x 48) spent a tenth of their
// time packing B.
template <typename T>
struct BSource {
  MatrixView<T> b;
  bool in_place;
  T* bpack;
  int64_t ldb;  // leading dimension of a B panel: B's row stride in place, else NR

  // Column panels of depth pass p0 (kc deep): packs them first unless B is read in place.
  const T* panels(int64_t n, int64_t p0, int64_t kc) const {
    if (in_place) return b.data + p0 * b.row_stride;
    pack_b(b, n, p0, kc, bpack);
    return bpack;
  }
};

template <typename T>
BSource<T> b_source(MatrixView<T> b, int64_t n, int64_t k) {
  constexpr int NR = Tile<T>::kNR, L = Tile<T>::kLanes;
  constexpr int64_t KC = Tile<T>::kKC;
  const bool in_place = b.col_stride == 1 && n % L == 0 && k <= KC;
  const int64_t n_padded = (n + NR - 1) / NR * NR;
  T* bpack = in_place ? nullptr : packing_buffer<T>(0, size_t(n_padded * std::min(k, KC)));
  return {b, in_place, bpack, in_place ? b.row_stride : NR};
}

// True when gemm reads A in place instead of packing it: its rows or its columns are contiguous,
// one depth pass covers it, and C is at most two column panels wide, so each element of A feeds
// one or two register tiles and packing it would cost about as much as those uses. Winograd's
// products in the channels-inner layout are of this kind: forward's (tiles x 16 to 64 channels,
// row-major A; for the 64-channel 7x7 layer 4-14% faster than packing, 1 core) and
// backward-filter's (channels x channels over a chunk's tiles, column-major A).
template <typename T>
bool reads_a_in_place(MatrixView<T> a, int64_t n, int64_t k) {
  return (a.col_stride == 1 || a.row_stride == 1) && k <= Tile<T>::kKC && n <= 2 * Tile<T>::kNR;
}

// gemm with A read in place (reads_a_in_place): whole MR-row blocks straight from A, the last
// rows (fewer than MR) packed with zero padding, since in place a tile reads all MR rows.
template <typename T>
void gemm_a_in_place(int64_t m, int64_t n, int64_t k, MatrixView<T> a, const BSource<T>& bsource, T* c, int64_t ldc,
                     GemmMode mode) {
  constexpr int MR = Tile<T>::kMR;
  const bool accumulate = mode == GemmMode::accumulate;
  const T* b_panels = bsource.panels(n, 0, k);
  const int64_t whole = m / MR * MR;
  if (a.col_stride == 1)
    multiply_block<T, ALayout::rows>(whole, n, k, a.data, a.row_stride, b_panels, bsource.in_place, bsource.ldb,
                                     c, ldc, accumulate);
  else
    multiply_block<T, ALayout::columns>(whole, n, k, a.data, a.col_stride, b_panels, bsource.in_place,
                                        bsource.ldb, c, ldc, accumulate);
  if (whole == m) return;
  T* rest = packing_buffer<T>(1, size_t(MR * k));
  pack_a(a, whole, m - whole, 0, k, rest);
  multiply_block<T, ALayout::packed>(m - whole, n, k, rest, 0, b_panels, bsource.in_place, bsource.ldb,
                                     c + whole * ldc, ldc, accumulate);
}

// The GEMM of gemm() and gemm_packed_lhs(): A is packed here per block from `a`, read from
// `a_packed` (pack_lhs's layout) when that is non-null, or read in place (reads_a_in_place).
template <typename T>
void gemm_blocks(int64_t m, int64_t n, int64_t k, MatrixView<T> a, const T* a_packed, MatrixView<T> b, T* c,
                 int64_t ldc, GemmMode mode) {
  constexpr int MR = Tile<T>::kMR;
  constexpr int64_t KC = Tile<T>::kKC, MC = Tile<T>::kMC;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return gemm_empty_depth(m, n, c, ldc, mode);
  const BSource<T> bsource = b_source(b, n, k);
  if (!a_packed && reads_a_in_place(a, n, k)) return gemm_a_in_place(m, n, k, a, bsource, c, ldc, mode);
  T* abuffer = a_packed ? nullptr : packing_buffer<T>(1, size_t((MC + MR) * std::min(k, KC)));
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t kc = std::min(KC, k - p0);
    const bool accumulate = p0 > 0 || mode == GemmMode::accumulate;
    const T* b_panels = bsource.panels(n, p0, kc);
    for (int64_t i0 = 0; i0 < m; i0 += MC) {
      const int64_t mc = std::min(MC, m - i0);
      const T* apack = a_packed ? a_packed + packed_block_offset<T>(m, p0, i0, kc) : abuffer;
      if (!a_packed) pack_a(a, i0, mc, p0, kc, abuffer);
      multiply_block<T, ALayout::packed>(mc, n, kc, apack, 0, b_panels, bsource.in_place, bsource.ldb,
                                         c + i0 * ldc, ldc, accumulate);
    }
  }
}

}  // namespace

template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixView<T> a, MatrixView<T> b, T* c, int64_t ldc, GemmMode mode) {
  gemm_blocks<T>(m, n, k, a, nullptr, b, c, ldc, mode);
}

template <typename T>
int64_t packed_lhs_size(int64_t m, int64_t k) {
  constexpr int MR = Tile<T>::kMR;
  return (m + MR - 1) / MR * MR * k;
}

template <typename T>
void pack_lhs(int64_t m, int64_t k, MatrixView<T> a, T* dst) {
  constexpr int64_t KC = Tile<T>::kKC, MC = Tile<T>::kMC;
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t kc = std::min(KC, k - p0);
    for (int64_t i0 = 0; i0 < m; i0 += MC)
      pack_a(a, i0, std::min(MC, m - i0), p0, kc, dst + packed_block_offset<T>(m, p0, i0, kc));
  }
}

template <typename T>
int packed_lhs_rows() {
  return Tile<T>::kMR;
}

template <typename T>
int64_t packed_lhs_offset(int64_t m, int64_t k, int64_t row, int64_t depth) {
  constexpr int MR = Tile<T>::kMR;
  constexpr int64_t KC = Tile<T>::kKC;
  static_assert(KC % 2 == 0, "a depth pair (d, d + 1), d even, stays in one depth block");
  const int64_t p0 = depth / KC * KC, kc = std::min(KC, k - p0);
  return packed_block_offset<T>(m, p0, row / MR * MR, kc) + (depth - p0) * MR + row % MR;
}

template <typename T>
void gemm_packed_lhs(int64_t m, int64_t n, int64_t k, const T* a_packed, MatrixView<T> b, T* c, int64_t ldc,
                     GemmMode mode) {
  gemm_blocks<T>(m, n, k, MatrixView<T>{nullptr, 0, 0}, a_packed, b, c, ldc, mode);
}

#define CG_INSTANTIATE(T)                                                                                    \
  template void gemm<T>(int64_t, int64_t, int64_t, MatrixView<T>, MatrixView<T>, T*, int64_t, GemmMode);    \
  template int64_t packed_lhs_size<T>(int64_t, int64_t);                                                     \
  template void pack_lhs<T>(int64_t, int64_t, MatrixView<T>, T*);                                            \
  template int packed_lhs_rows<T>();                                                                         \
  template int64_t packed_lhs_offset<T>(int64_t, int64_t, int64_t, int64_t);                                 \
  template void gemm_packed_lhs<T>(int64_t, int64_t, int64_t, const T*, MatrixView<T>, T*, int64_t, GemmMode);
CG_INSTANTIATE(float)
CG_INSTANTIATE(double)
#undef CG_INSTANTIATE

}  // namespace cg::kernels::cpu
