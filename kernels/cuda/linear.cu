// The fully-connected layer through cuBLAS, row-major like the CPU reference. cuBLAS is
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

// This thread's handle on the current device (kernels/cuda/check.h says why per thread).
cublasHandle_t handle(Stream stream) {
  cublasHandle_t& h = thread_handle_slot<cublasHandle_t>("cuBLAS");
  if (!h) CG_CUBLAS_CHECK(cublasCreate(&h));
  CG_CUBLAS_CHECK(cublasSetStream(h, as_cuda(stream)));
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

template <typename T>
__global__ void add_bias_kernel(int64_t m, int64_t n, const T* bias, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(y[i]) + to_f32(bias[i % n]));
}

// db[j] = sum over rows of dy[:, j]: one thread per column, rows in order (deterministic).
template <typename T>
__global__ void bias_grad_kernel(int64_t m, int64_t n, const T* dy, T* db) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (int64_t r = 0; r < m; ++r) s += to_f32(dy[r * n + j]);
    db[j] = from_f32<T>(s);
  }
}

template <typename T>
struct AddBias {
  static void run(int64_t m, int64_t n, const void* bias, void* y, Stream s) {
    add_bias_kernel<T><<<blocks_for(m * n), kThreads, 0, as_cuda(s)>>>(m, n, static_cast<const T*>(bias),
                                                                       static_cast<T*>(y));
    CG_CUDA_AFTER_LAUNCH("linear add_bias_kernel");
  }
};

template <typename T>
struct BiasGrad {
  static void run(int64_t m, int64_t n, const void* dy, void* db, Stream s) {
    bias_grad_kernel<T><<<blocks_for(n), kThreads, 0, as_cuda(s)>>>(m, n, static_cast<const T*>(dy),
                                                                    static_cast<T*>(db));
    CG_CUDA_AFTER_LAUNCH("linear bias_grad_kernel");
  }
};

}  // namespace

void linear_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w, const void* bias,
                    void* y, Stream stream) {
  cublasHandle_t h = handle(stream);
  gemm(h, dtype, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, w, k, x, k, y, n);
  if (bias) dispatch_floating<AddBias>("linear bias", dtype, m, n, bias, y, stream);
}

void linear_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x, const void* w,
                     void* dx, void* dw, void* db, Stream stream) {
  cublasHandle_t h = handle(stream);
  if (dx) gemm(h, dtype, CUBLAS_OP_N, CUBLAS_OP_N, k, m, n, w, k, dy, n, dx, k);
  gemm(h, dtype, CUBLAS_OP_N, CUBLAS_OP_T, k, n, m, x, k, dy, n, dw, k);
  if (db) dispatch_floating<BiasGrad>("linear bias grad", dtype, m, n, dy, db, stream);
}

}  // namespace cg::kernels::cuda
