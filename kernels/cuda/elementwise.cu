// Grid-stride elementwise kernels for float32, float16 and bfloat16: values are loaded, computed
// on in fp32 registers and stored in the tensor's type. Memory-bound by design; one launch shape.
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/elementwise.h"

namespace cg::kernels::cuda {
namespace {

enum class Op { relu, relu_backward, add, add_relu, accumulate, scale };

// y[i] = op(a[i], b[i]) (b unused by the unary ops).
template <typename T, Op op>
__global__ void map_kernel(int64_t n, const T* __restrict__ a, const T* __restrict__ b, T* y, float alpha) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float va = to_f32(a[i]);
    float r;
    if constexpr (op == Op::relu) r = fmaxf(va, 0.f);
    else if constexpr (op == Op::relu_backward) r = to_f32(b[i]) > 0.f ? va : 0.f;  // a = dy, b = y
    else if constexpr (op == Op::add) r = va + to_f32(b[i]);
    else if constexpr (op == Op::add_relu) r = fmaxf(va + to_f32(b[i]), 0.f);
    else if constexpr (op == Op::accumulate) r = to_f32(y[i]) + va;
    else r = alpha * va;
    y[i] = from_f32<T>(r);
  }
}

template <Op op>
struct Map {
  template <typename T>
  struct For {
    static void run(const char* name, int64_t n, const void* a, const void* b, void* y, float alpha, Stream s) {
      if (n == 0) return;
      map_kernel<T, op><<<blocks_for(n), kThreads, 0, as_cuda(s)>>>(n, static_cast<const T*>(a),
                                                                     static_cast<const T*>(b), static_cast<T*>(y), alpha);
      CG_CUDA_AFTER_LAUNCH(name);
    }
  };
};

template <Op op>
void map(const char* name, int64_t n, DType dtype, const void* a, const void* b, void* y, float alpha, Stream s) {
  dispatch_floating<Map<op>::template For>(name, dtype, name, n, a, b, y, alpha, s);
}

}  // namespace

void relu_forward(int64_t n, DType dtype, const void* x, void* y, Stream s) {
  map<Op::relu>("relu_forward", n, dtype, x, nullptr, y, 0.f, s);
}
void relu_backward(int64_t n, DType dtype, const void* dy, const void* y, void* dx, Stream s) {
  map<Op::relu_backward>("relu_backward", n, dtype, dy, y, dx, 0.f, s);
}
void add(int64_t n, DType dtype, const void* a, const void* b, void* y, Stream s) {
  map<Op::add>("add", n, dtype, a, b, y, 0.f, s);
}
void add_relu(int64_t n, DType dtype, const void* a, const void* b, void* y, Stream s) {
  map<Op::add_relu>("add_relu", n, dtype, a, b, y, 0.f, s);
}
void accumulate(int64_t n, DType dtype, const void* x, void* y, Stream s) {
  map<Op::accumulate>("accumulate", n, dtype, x, nullptr, y, 0.f, s);
}
void scale(int64_t n, DType dtype, float alpha, const void* x, void* y, Stream s) {
  map<Op::scale>("scale", n, dtype, x, nullptr, y, alpha, s);
}

}  // namespace cg::kernels::cuda
