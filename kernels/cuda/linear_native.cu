// The fully-connected layer's own kernels: one tiled product C = A B, whose operands are read
// through strides so that the forward and both gradients are the same kernel, and the bias
// kernels shared with the cuBLAS path. The classifier's products are small (batch x channels x
// classes); this kernel is for correctness where cuBLAS is absent, not for speed.
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear.h"

namespace cg::kernels::cuda {
namespace {

constexpr int kTile = 16;

// A(r, t) = a[r * a_row + t * a_depth], B(t, c) = b[t * b_depth + c * b_col], C [rows, cols]
// row-major. Each 16x16 block owns a tile of C and walks the depth 16 at a time through shared
// memory, summing in fp32 in depth order (deterministic).
struct Operands {
  int64_t rows, cols, depth;
  int64_t a_row, a_depth, b_depth, b_col;
};

template <typename T>
__global__ void product_kernel(Operands p, const T* a, const T* b, T* c) {
  CG_SHARED(float, as, [kTile][kTile + 1]);  // +1: the column reads below hit distinct banks
  CG_SHARED(float, bs, [kTile][kTile + 1]);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t r = blockIdx.y * int64_t(kTile) + ty, col = blockIdx.x * int64_t(kTile) + tx;
  float sum = 0.f;
  for (int64_t t0 = 0; t0 < p.depth; t0 += kTile) {
    const int64_t ta = t0 + tx, tb = t0 + ty;
    as[ty][tx] = r < p.rows && ta < p.depth ? to_f32(a[r * p.a_row + ta * p.a_depth]) : 0.f;
    bs[ty][tx] = col < p.cols && tb < p.depth ? to_f32(b[tb * p.b_depth + col * p.b_col]) : 0.f;
    __syncthreads();
    for (int t = 0; t < kTile; ++t) sum = fmaf(as[ty][t], bs[t][tx], sum);
    __syncthreads();
  }
  if (r < p.rows && col < p.cols) c[r * p.cols + col] = from_f32<T>(sum);
}

template <typename T>
struct Product {
  static void run(const Operands& p, const void* a, const void* b, void* c, Stream s) {
    const dim3 grid(unsigned((p.cols + kTile - 1) / kTile), unsigned((p.rows + kTile - 1) / kTile));
    launch_kernel(product_kernel<T>, "linear product_kernel", grid, dim3(kTile, kTile), 0, as_cuda(s), p,
                  static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c));
  }
};

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
    launch_kernel(add_bias_kernel<T>, "linear add_bias_kernel", blocks_for(m * n), kThreads, 0, as_cuda(s), m, n,
                  static_cast<const T*>(bias), static_cast<T*>(y));
  }
};

template <typename T>
struct BiasGrad {
  static void run(int64_t m, int64_t n, const void* dy, void* db, Stream s) {
    launch_kernel(bias_grad_kernel<T>, "linear bias_grad_kernel", blocks_for(n), kThreads, 0, as_cuda(s), m, n,
                  static_cast<const T*>(dy), static_cast<T*>(db));
  }
};

}  // namespace

void linear_add_bias(int64_t m, int64_t n, DType dtype, const void* bias, void* y, Stream stream) {
  dispatch_floating<AddBias>("linear bias", dtype, m, n, bias, y, stream);
}

void linear_bias_grad(int64_t m, int64_t n, DType dtype, const void* dy, void* db, Stream stream) {
  dispatch_floating<BiasGrad>("linear bias grad", dtype, m, n, dy, db, stream);
}

void linear_native_forward(int64_t m, int64_t k, int64_t n, DType dtype, const void* x, const void* w,
                           const void* bias, void* y, Stream stream, const WorkspaceFn&) {
  // y[i, j] = sum_t x[i, t] w[j, t]
  dispatch_floating<Product>("linear", dtype, Operands{m, n, k, k, 1, 1, k}, x, w, y, stream);
  if (bias) linear_add_bias(m, n, dtype, bias, y, stream);
}

void linear_native_backward(int64_t m, int64_t k, int64_t n, DType dtype, const void* dy, const void* x,
                            const void* w, void* dx, void* dw, void* db, Stream stream, const WorkspaceFn&) {
  // dx[i, t] = sum_j dy[i, j] w[j, t];  dw[j, t] = sum_i dy[i, j] x[i, t]
  if (dx) dispatch_floating<Product>("linear backward (dx)", dtype, Operands{m, k, n, n, 1, k, 1}, dy, w, dx, stream);
  dispatch_floating<Product>("linear backward (dw)", dtype, Operands{n, k, m, 1, n, k, 1}, dy, x, dw, stream);
  if (db) linear_bias_grad(m, n, dtype, dy, db, stream);
}

}  // namespace cg::kernels::cuda
