// Shared by the .cu files: the CUDA type of each floating dtype, loads and stores that compute in
// fp32 registers (round to nearest even on the way down), and a dispatcher from DType to type.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/check.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Calls F::template run<T>(args...) with T the CUDA type of a floating dtype (f32, f16, bf16).
template <template <typename> class F, typename... Args>
void dispatch_floating(const char* op, DType dtype, Args&&... args) {
  switch (dtype) {
    case DType::f32: return F<float>::run(std::forward<Args>(args)...);
    case DType::f16: return F<__half>::run(std::forward<Args>(args)...);
    case DType::bf16: return F<__nv_bfloat16>::run(std::forward<Args>(args)...);
    default: throw Error(fmt::format("{}: no CUDA kernel for dtype {}", op, dtype_name(dtype)));
  }
}

constexpr int kThreads = 256;

// Sum over the block of one double per thread in a fixed tree order (deterministic); every thread
// gets the total. `shared` holds blockDim.x doubles (a power of two, at most kThreads).
__device__ inline double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}
// Enough blocks to fill an H100 (132 SMs) several times over; grid-stride loops do the rest.
inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 1 ? 1 : (b > 132 * 16 ? 132 * 16 : b));
}
inline cudaStream_t as_cuda(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace cg::kernels::cuda
