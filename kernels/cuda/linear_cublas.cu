// The fully-connected layer through cuBLAS (kernels/cuda/linear.h), row-major like the CPU reference. cuBLAS is
// column-major, and a row-major [r, c] matrix is the column-major [c, r] one, so:
//   y[m,n] = x[m,k] w[n,k]^T   is, column-major,  y^T (n x m) = w (n x k, from w^T stored) * x^T
//   dx[m,k] = dy[m,n] w[n,k]   is                 dx^T (k x m) = w^T (k x n) * dy^T
//   dw[n,k] = dy[m,n]^T x[m,k] is                 dw^T (k x n) = x^T (k x m) * dy (m x n)
// All products accumulate in float32 (CUBLAS_COMPUTE_32F; pedantic for float32, so no TF32).
#include <cublas_v2.h>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/linear.h"

#define CG_CUBLAS_CHECK(expr)                                                                                   \
  do {                                                                                                          \
    const cublasStatus_t cg_st_ = (expr);                                                                       \
    if (cg_st_ != CUBLAS_STATUS_SUCCESS)                                                                        \
      ::cg::kernels::cuda::fail_call("cuBLAS", #expr, cublasGetStatusString(cg_st_), __FILE__, __LINE__);       \
  } while (0)

namespace cg::kernels::cuda {
namespace {

// This thread's handle on the current device (kernels/cuda/check.h says why per thread), bound
// to the call's stream and workspace. cublasSetStream resets the workspace to cuBLAS's own pool,
// so the workspace is set after it, on every call.
cublasHandle_t handle(Stream stream, const WorkspaceFn& workspace) {
  cublasHandle_t& h = thread_handle_slot<cublasHandle_t>("cuBLAS");
  if (!h) CG_CUBLAS_CHECK(cublasCreate(&h));
  CG_CUBLAS_CHECK(cublasSetStream(h, as_cuda(stream)));
  if (workspace) CG_CUBLAS_CHECK(cublasSetWorkspace(h, workspace(kCublasWorkspaceBytes), kCublasWorkspaceBytes));
  return h;
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: throw Error(fmt::format("linear: no cuBLAS path for dtype {}", dtype_name(dtype)));
  }
}

// Column-major C (rows x cols) = op(A) op(B), leading dimensions given; beta = 0.
void gemm(cublasHandle_t h, DType dtype, cublasOperation_t ta, cublasOperation_t tb, int64_t rows, int64_t cols,
          int64_t depth, const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc) {
  const float one = 1.f, zero = 0.f;
  const cudaDataType_t t = data_type(dtype);
  const cublasComputeType_t compute = dtype == DType::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  CG_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, int(rows), int(cols), int(depth), &one, a, t, int(lda), b, t, int(ldb),
                               &zero, c, t, int(ldc), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace


void linear_cublas_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w, const void* bias,
                           void* y, Stream stream, const WorkspaceFn& workspace) {
  cublasHandle_t h = handle(stream, workspace);
  gemm(h, dtype, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, w, k, x, k, y, n);
  if (bias) linear_add_bias(m, n, dtype, bias, y, stream);
}

void linear_cublas_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x, const void* w,
                            void* dx, void* dw, void* db, Stream stream, const WorkspaceFn& workspace) {
  cublasHandle_t h = handle(stream, workspace);
  if (dx) gemm(h, dtype, CUBLAS_OP_N, CUBLAS_OP_N, k, m, n, w, k, dy, n, dx, k);
  gemm(h, dtype, CUBLAS_OP_N, CUBLAS_OP_T, k, n, m, x, k, dy, n, dw, k);
  if (db) linear_bias_grad(m, n, dtype, dy, db, stream);
}

}  // namespace cg::kernels::cuda
