// Grid-stride elementwise kernels for float32, float16 and bfloat16: values are loaded, computed
// on in fp32 registers and stored in the tensor's type. Memory-bound by design, so when every
// pointer is 16-byte aligned each thread moves whole 16-byte vectors (4 floats or 8 halves) and the
// last n % V elements go one per thread; otherwise everything goes one element per thread.
#include <cstdint>
#include <cstring>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda {
namespace {

enum class Op { relu, relu_backward, add, add_relu, accumulate, scale, silu, silu_backward };

// Which operands an op reads besides a.
template <Op op>
constexpr bool kReadsB = op == Op::relu_backward || op == Op::add || op == Op::add_relu || op == Op::silu_backward;
template <Op op> constexpr bool kReadsY = op == Op::accumulate;

// One element: a, b and the old y as fp32 (b and y only where the op reads them).
template <Op op>
__device__ __forceinline__ float apply(float a, float b, float y_old, float alpha) {
  if constexpr (op == Op::relu) return fmaxf(a, 0.f);
  else if constexpr (op == Op::relu_backward) return b > 0.f ? a : 0.f;  // a = dy, b = y
  else if constexpr (op == Op::add) return a + b;
  else if constexpr (op == Op::add_relu) return fmaxf(a + b, 0.f);
  else if constexpr (op == Op::accumulate) return y_old + a;
  else if constexpr (op == Op::silu) return a / (1.f + expf(-a));
  else if constexpr (op == Op::silu_backward) {  // a = dy, b = x
    const float s = 1.f / (1.f + expf(-b));
    return a * s * (1.f + b * (1.f - s));
  } else return alpha * a;
}

template <Op op, typename T>
__device__ __forceinline__ void apply_at(int64_t i, const T* a, const T* b, T* y, float alpha) {
  const float vb = kReadsB<op> ? to_f32(b[i]) : 0.f, vy = kReadsY<op> ? to_f32(y[i]) : 0.f;
  y[i] = from_f32<T>(apply<op>(to_f32(a[i]), vb, vy, alpha));
}

// 16 bytes as V values of T; the caller guarantees 16-byte alignment.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / int(sizeof(T));
  T v[kSize];
  __device__ __forceinline__ static Vec16 load(const T* p) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    Vec16 out;
    memcpy(out.v, &raw, 16);
    return out;
  }
  __device__ __forceinline__ void store(T* p) const {
    uint4 raw;
    memcpy(&raw, v, 16);
    *reinterpret_cast<uint4*>(p) = raw;
  }
};

// Scalar path (some pointer is not 16-byte aligned): y[i] = op(a[i], b[i]).
// Pointers are not __restrict__: in-place calls (y == a) are allowed and each element is read and
// written by the same thread.
template <typename T, Op op>
__global__ void map_kernel(int64_t n, const T* a, const T* b, T* y, float alpha) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    apply_at<op>(i, a, b, y, alpha);
}

// Vector path: vectors [0, n / V) by grid stride, then the n % V tail elements by threads 0.. of
// the grid.
template <typename T, Op op>
__global__ void map_vec_kernel(int64_t n, const T* a, const T* b, T* y, float alpha) {
  using V = Vec16<T>;
  const int64_t vectors = n / V::kSize, first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t k = first; k < vectors; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = k * V::kSize;
    const V va = V::load(a + at);
    V vb, vy;
    if constexpr (kReadsB<op>) vb = V::load(b + at);
    if constexpr (kReadsY<op>) vy = V::load(y + at);
    V out;
#pragma unroll
    for (int e = 0; e < V::kSize; ++e)
      out.v[e] = from_f32<T>(apply<op>(to_f32(va.v[e]), kReadsB<op> ? to_f32(vb.v[e]) : 0.f,
                                       kReadsY<op> ? to_f32(vy.v[e]) : 0.f, alpha));
    out.store(y + at);
  }
  const int64_t tail = vectors * V::kSize + first;
  if (tail < n) apply_at<op>(tail, a, b, y, alpha);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <Op op>
struct Map {
  template <typename T>
  struct For {
    static void run(const char* name, int64_t n, const void* a_, const void* b_, void* y_, float alpha, Stream s) {
      if (n == 0) return;
      const T *a = static_cast<const T*>(a_), *b = static_cast<const T*>(b_);
      T* y = static_cast<T*>(y_);
      if (aligned16(a) && (!kReadsB<op> || aligned16(b)) && aligned16(y)) {
        // At least one thread per tail element: the tail is < kSize <= 8 elements, one block is 256.
        const int64_t vectors = n / Vec16<T>::kSize;
        launch_kernel(map_vec_kernel<T, op>, name, blocks_for(vectors), kThreads, 0, as_cuda(s), n, a, b, y, alpha);
      } else {
        launch_kernel(map_kernel<T, op>, name, blocks_for(n), kThreads, 0, as_cuda(s), n, a, b, y, alpha);
      }
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
void silu_forward(int64_t n, DType dtype, const void* x, void* y, Stream s) {
  map<Op::silu>("silu_forward", n, dtype, x, nullptr, y, 0.f, s);
}
void silu_backward(int64_t n, DType dtype, const void* dy, const void* x, void* dx, Stream s) {
  map<Op::silu_backward>("silu_backward", n, dtype, dy, x, dx, 0.f, s);
}

}  // namespace cg::kernels::cuda
