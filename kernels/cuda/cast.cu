// Conversions between element types on the GPU, with kernels/cpu/cast.h's rules: 16-bit floats
// convert through float (round to nearest even), floating to integer saturates
// (kernels/float_to_int.h, shared with the CPU), everything else by C++'s conversion. fill()
// converts its value once on the host with the CPU's own code and copies the bytes, so a filled
// tensor is bit-identical on both devices.
#include <cstring>

#include "kernels/cpu/cast.h"
#include "kernels/float_to_int.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda {
namespace {

template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<From, __half> || std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(to_f32(v));
  } else if constexpr (std::is_same_v<To, __half> || std::is_same_v<To, __nv_bfloat16>) {
    return from_f32<To>(float(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return kernels::float_to_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <typename From, typename To>
__global__ void cast_kernel(int64_t n, const From* src, To* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = convert<To>(src[i]);
}

// Calls f(T{}) with T the CUDA type of t (a null pointer of it, to carry the type).
template <typename F>
void dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(static_cast<float*>(nullptr));
    case DType::f64: return f(static_cast<double*>(nullptr));
    case DType::f16: return f(static_cast<__half*>(nullptr));
    case DType::bf16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case DType::i64: return f(static_cast<int64_t*>(nullptr));
    case DType::i32: return f(static_cast<int32_t*>(nullptr));
    case DType::u8: return f(static_cast<uint8_t*>(nullptr));
  }
  throw Error("cast: unknown dtype");
}

template <typename T>
__global__ void fill_kernel(int64_t n, T value, T* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = value;
}

template <typename T>
void fill_bytes(int64_t n, const void* value, void* y, Stream s) {
  T v;
  std::memcpy(&v, value, sizeof(T));
  launch_kernel(fill_kernel<T>, "fill_kernel", blocks_for(n), kThreads, 0, as_cuda(s), n, v, static_cast<T*>(y));
}

}  // namespace

void cast(int64_t n, DType src_dtype, const void* src, DType dst_dtype, void* dst, Stream s) {
  if (n == 0) return;
  if (src_dtype == dst_dtype) {
    if (src != dst)
      CG_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * itemsize(src_dtype), cudaMemcpyDeviceToDevice, as_cuda(s)));
    return;
  }
  dispatch_all(src_dtype, [&](auto* from_tag) {
    using From = std::remove_pointer_t<decltype(from_tag)>;
    dispatch_all(dst_dtype, [&](auto* to_tag) {
      using To = std::remove_pointer_t<decltype(to_tag)>;
      launch_kernel(cast_kernel<From, To>, "cast_kernel", blocks_for(n), kThreads, 0, as_cuda(s), n,
                    static_cast<const From*>(src), static_cast<To*>(dst));
    });
  });
}

void fill(int64_t n, DType dtype, double value, void* y, Stream s) {
  if (n == 0) return;
  alignas(8) unsigned char bits[8];
  cpu::fill_cast(1, value, dtype, bits);  // the CPU's conversion, bit for bit
  switch (itemsize(dtype)) {
    case 1: return fill_bytes<uint8_t>(n, bits, y, s);
    case 2: return fill_bytes<uint16_t>(n, bits, y, s);
    case 4: return fill_bytes<uint32_t>(n, bits, y, s);
    case 8: return fill_bytes<uint64_t>(n, bits, y, s);
  }
  throw Error(fmt::format("fill: dtype {} has no CUDA fill", dtype_name(dtype)));
}

}  // namespace cg::kernels::cuda
