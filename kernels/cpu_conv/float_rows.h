// Moves of short float rows (a few dozen values: one row of a small feature map), the CPU
// convolutions' copies into padded or strided layouts. With AVX-512 they are masked vector loads
// and stores, tails included: no scalar remainder loop, and nothing GCC turns back into a memcpy
// or memset call (which it did with the plain loops: 1.7% of a training step in library calls).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace cg::kernels::cpu {

constexpr int64_t kRowLanes = 16;  // floats per AVX-512 vector

#if defined(__AVX512F__)
// The mask of lanes [0, k), k clamped to [0, 16].
inline __mmask16 lanes_below(int64_t k) { return __mmask16(k >= kRowLanes ? 0xffffu : k <= 0 ? 0u : (1u << k) - 1u); }
#endif

// dst[0, n) = src[0, n), and dst[0, n) = 0.
inline void copy_floats(const float* __restrict src, int64_t n, float* __restrict dst) {
#if defined(__AVX512F__)
  for (int64_t i = 0; i < n; i += kRowLanes) {
    const __mmask16 m = lanes_below(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
  }
#else
  std::memcpy(dst, src, sizeof(float) * size_t(n));
#endif
}
inline void zero_floats(float* dst, int64_t n) {
#if defined(__AVX512F__)
  for (int64_t i = 0; i < n; i += kRowLanes) _mm512_mask_storeu_ps(dst + i, lanes_below(n - i), _mm512_setzero_ps());
#else
  std::fill(dst, dst + n, 0.f);
#endif
}

// Asks for the cache lines of src[0, n): the next plane, while a copy walks this one. The copies
// into padded or strided layouts read a plane's rows out of order (a stride-2 pass reads every
// other row first), so the hardware prefetcher does not run ahead of them, and they waited on
// their loads (perf: the first load of each row).
template <typename T>
inline void prefetch_plane(const T* src, int64_t n) {
  for (int64_t i = 0; i < n; i += 64 / int64_t(sizeof(T))) __builtin_prefetch(src + i);
}

// dst[k] = src[2 * k] for k < n: a phase row of a stride-2 layer (reads src[0, 2n - 1) only).
inline void copy_even_floats(const float* __restrict src, int64_t n, float* __restrict dst) {
#if defined(__AVX512F__)
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t k = 0; k < n; k += kRowLanes) {
    const int64_t outputs = std::min<int64_t>(kRowLanes, n - k), span = 2 * outputs - 1;
    const __m512 lo = _mm512_maskz_loadu_ps(lanes_below(span), src + 2 * k);
    const __m512 hi = _mm512_maskz_loadu_ps(lanes_below(std::max<int64_t>(0, span - kRowLanes)), src + 2 * k + kRowLanes);
    _mm512_mask_storeu_ps(dst + k, lanes_below(outputs), _mm512_permutex2var_ps(lo, even, hi));
  }
#else
  for (int64_t k = 0; k < n; ++k) dst[k] = src[2 * k];
#endif
}

}  // namespace cg::kernels::cpu
