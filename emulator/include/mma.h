// WMMA (nvcuda::wmma) on the emulated device, found ahead of the toolkit's <mma.h> in the
// emulated build. A fragment is spread over the warp as on a GPU: lane l holds tile elements
// l, l + 32, l + 64, ... (row-major over the tile), so a kernel that treats a fragment as one
// lane's whole tile fails here too. mma_sync gathers the warp's fragments in the warp's scratch
// area, and each lane computes its own outputs with fp32 products and sums, as tensor cores do
// for the half types. The pointer and stride rules of the real API are checked.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <fmt/format.h>

#include "cg_emu/grid.h"
#include "cg_emu/traffic.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {

template <typename Use, int M, int N, int K>
struct TileSize;
template <int M, int N, int K>
struct TileSize<matrix_a, M, N, K> {
  static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct TileSize<matrix_b, M, N, K> {
  static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct TileSize<accumulator, M, N, K> {
  static constexpr int rows = M, cols = N;
};

inline float to_float(float v) { return v; }
inline float to_float(__half v) { return __half2float(v); }
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

inline int lane() { return ::cg_emu::current_thread()->linear % 32; }

// The real API's rules: a 256-bit aligned pointer and a stride of a whole 16 bytes.
template <typename T>
void check_access(const T* p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    throw ::cg_emu::KernelFault{fmt::format("wmma: pointer {} is not 256-bit aligned", static_cast<const void*>(p))};
  if (ldm * sizeof(T) % 16 != 0)
    throw ::cg_emu::KernelFault{fmt::format("wmma: ldm {} is not a multiple of 16 bytes", ldm)};
}

}  // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
 public:
  using Size = detail::TileSize<Use, M, N, K>;
  static constexpr int num_elements = Size::rows * Size::cols / 32;
  T x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, std::type_identity_t<T> value) {
  for (T& v : f.x) v = value;
}

namespace detail {

// Element e of this lane: tile row and column.
template <typename Frag>
void element_of(int e, int& r, int& c) {
  const int i = lane() + 32 * e;
  r = i / Frag::Size::cols;
  c = i % Frag::Size::cols;
}

template <typename Frag, typename T>
void load(Frag& f, const T* p, unsigned ldm, bool row_major) {
  check_access(p, ldm);
  for (int e = 0; e < Frag::num_elements; ++e) {
    int r, c;
    element_of<Frag>(e, r, c);
    f.x[e] = p[row_major ? size_t(r) * ldm + c : size_t(c) * ldm + r];
  }
}

}  // namespace detail

template <typename Use, int M, int N, int K, typename T>
void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const T* p, unsigned ldm) {
  detail::load(f, p, ldm, true);
}
template <typename Use, int M, int N, int K, typename T>
void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const T* p, unsigned ldm) {
  detail::load(f, p, ldm, false);
}
template <int M, int N, int K, typename T>
void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm, layout_t layout) {
  detail::load(f, p, ldm, layout == mem_row_major);
}

template <int M, int N, int K, typename T>
void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  using Frag = fragment<accumulator, M, N, K, T>;
  detail::check_access(p, ldm);
  for (int e = 0; e < Frag::num_elements; ++e) {
    int r, c;
    detail::element_of<Frag>(e, r, c);
    p[layout == mem_row_major ? size_t(r) * ldm + c : size_t(c) * ldm + r] = f.x[e];
  }
}

// d = a b + c for the warp's 16x16x16 tile; d may be c.
template <int M, int N, int K, typename T, typename LA, typename LB, typename Acc>
void mma_sync(fragment<accumulator, M, N, K, Acc>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, Acc>& c) {
  static_assert(M * K + K * N + M * N <= ::cg_emu::kWarpScratchFloats, "tile larger than the warp's scratch");
  float* sa = ::cg_emu::warp_scratch();
  float* sb = sa + M * K;
  float* sc = sb + K * N;
  const int l = detail::lane();
  for (int e = 0; e < a.num_elements; ++e) sa[l + 32 * e] = detail::to_float(a.x[e]);
  for (int e = 0; e < b.num_elements; ++e) sb[l + 32 * e] = detail::to_float(b.x[e]);
  for (int e = 0; e < c.num_elements; ++e) sc[l + 32 * e] = detail::to_float(c.x[e]);
  ::cg_emu::warp_barrier();
  for (int e = 0; e < d.num_elements; ++e) {
    const int i = l + 32 * e, r = i / N, col = i % N;
    float sum = sc[i];
    for (int k = 0; k < K; ++k) sum = fmaf(sa[r * K + k], sb[k * N + col], sum);
    d.x[e] = Acc(sum);
  }
  if (l == 0) ::cg_emu::count_mma_flops(uint64_t(2) * M * N * K);
  ::cg_emu::warp_barrier();  // the scratch is reused by the next mma_sync
}

}  // namespace nvcuda::wmma
