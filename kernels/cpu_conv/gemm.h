// A single-threaded matrix product for the fast CPU convolutions (im2col, Winograd), written for
// AVX-512 register tiles but portable C++ (GCC/Clang vector extensions). Rule: the summation order
// of every output element depends only on the matrix sizes, never on threads or alignment, so
// callers that split work in fixed chunks stay bit-for-bit deterministic.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

// A read-only strided matrix: element (i, j) is data[i * row_stride + j * col_stride]. A
// row-major matrix with leading dimension ld is {p, ld, 1}; its transpose is {p, 1, ld}.
template <typename T>
struct MatrixView {
  const T* data;
  int64_t row_stride, col_stride;
};

template <typename T>
MatrixView<T> row_major(const T* data, int64_t ld) { return {data, ld, 1}; }
template <typename T>
MatrixView<T> transposed(const T* data, int64_t ld) { return {data, 1, ld}; }
template <typename T>
MatrixView<T> transposed(MatrixView<T> m) { return {m.data, m.col_stride, m.row_stride}; }

enum class GemmMode { overwrite, accumulate };

// C[m, n] = A[m, k] * B[k, n] (overwrite) or C += A * B (accumulate); C is row-major with leading
// dimension ldc. Runs on the calling thread only (call it from inside a parallel region).
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixView<T> a, MatrixView<T> b, T* c, int64_t ldc,
          GemmMode mode);

// A left operand packed once for many products (a layer's Winograd filters, multiplied by every
// chunk of images): pack_lhs writes A [m, k] into packed_lhs_size(m, k) elements at dst, and
// gemm_packed_lhs then computes what gemm computes with that A, bit for bit, without repacking it.
template <typename T>
int64_t packed_lhs_size(int64_t m, int64_t k);
template <typename T>
void pack_lhs(int64_t m, int64_t k, MatrixView<T> a, T* dst);
// Where pack_lhs puts A's element (row, depth), and how many rows of one depth sit side by side
// there (gemm.cpp's MR): rows r0 .. r0 + packed_lhs_rows - 1 (r0 a multiple of it) of depth d are
// contiguous, and those of depth d + 1 follow them when d is even. So a producer can write the
// packed form directly (kernels/cpu_conv/winograd.cpp writes its filters 8 rows x 2 depths a vector).
template <typename T>
int packed_lhs_rows();
template <typename T>
int64_t packed_lhs_offset(int64_t m, int64_t k, int64_t row, int64_t depth);
template <typename T>
void gemm_packed_lhs(int64_t m, int64_t n, int64_t k, const T* a_packed, MatrixView<T> b, T* c, int64_t ldc,
                     GemmMode mode);

}  // namespace cg::kernels::cpu
