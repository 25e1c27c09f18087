// The one way an op reaches a device: `on_device` runs the op's CPU kernel or its GPU kernel, by
// where a tensor lives (the registries of engine/registry.h sit above it, only where implementations
// compete). GPU kernels get what they need from the engine here too: the current stream and
// scratch memory. CPU kernels exist for float32 and float64 (the latter for gradient checks); GPU
// kernels for float32, float16 and bfloat16. Anything else fails naming the op.
#pragma once
#include <concepts>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cudnn.h"

namespace cg::ops::detail {

using kernels::kCudaBuild;

// Refuses a tensor that is not on the CPU, naming the op (a CUDA tensor in a build without CUDA).
inline void require_cpu(const char* op, const Tensor& t) {
  CG_CHECK(t.device().is_cpu(), "{}: {} has no implementation on {} in this build", op, t.str(),
           t.device().str());
}

// Runs f.operator()<T>() for T the CPU tensor t's dtype, float or double.
template <typename F>
decltype(auto) dispatch_floating(const char* op, const Tensor& t, F&& f) {
  require_cpu(op, t);
  switch (t.dtype()) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    default: CG_FAIL("{}: dtype {} is not supported on the CPU", op, dtype_name(t.dtype()));
  }
}

// The dtypes the GPU kernels take.
inline bool gpu_dtype(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

// True for a CUDA tensor, whose op then runs the GPU kernel.
inline bool on_gpu(const char* op, const Tensor& t) {
  if (!t.device().is_cuda()) return false;
  CG_CHECK(gpu_dtype(t.dtype()),
           "{}: {} on the GPU needs float32, float16 or bfloat16", op, t.str());
  return true;
}

// A CPU kernel written once per dtype: `[&]<typename T>() { kernels::cpu::relu<T>(...); }`.
template <typename F>
concept TypedCpuKernel = requires(F f) { f.template operator()<float>(); };

// The op's kernel for where `t` lives: gpu() on a CUDA device, cpu() on the CPU; a TypedCpuKernel
// is called for t's dtype (float or double), a plain one as it is (it takes the dtypes it checks).
// Both return the same type. The GPU call is discarded in a build without the CUDA backend, which
// then needs no kernels/cuda code to link (kernels/backend.h); no CUDA tensor exists in such a
// build (the allocator refuses the device), so nothing is lost.
template <typename Cpu, typename Gpu>
decltype(auto) on_device(const char* op, const Tensor& t, Cpu&& cpu, Gpu&& gpu) {
  if constexpr (kCudaBuild)
    if (on_gpu(op, t)) return gpu();
  if constexpr (TypedCpuKernel<Cpu>) {
    return dispatch_floating(op, t, cpu);
  } else {
    require_cpu(op, t);
    return cpu();
  }
}

// The same for an op whose tensors the caller checked (the optimizer's lists, integer counters):
// by the device alone.
template <typename Cpu, typename Gpu>
decltype(auto) on_device(const char* op, Device device, Cpu&& cpu, Gpu&& gpu) {
  if constexpr (kCudaBuild)
    if (device.is_cuda()) return gpu();
  CG_CHECK(device.is_cpu(), "{}: no implementation on {} in this build", op, device.str());
  return cpu();
}

// The stream an op on `t` enqueues its kernels on.
inline kernels::cuda::Stream stream_of(const Tensor& t) { return current_stream(t.device()).handle(); }

// Scratch memory for a cuDNN call from the caching allocator: the tensors stay in `keep` until
// the caller returns, after which their blocks may be reused in stream order (safe: later work on
// the same stream runs after the call's kernels).
inline kernels::cuda::WorkspaceFn workspace(Device device, std::vector<Tensor>& keep) {
  return [device, &keep](size_t bytes) -> void* {
    keep.push_back(Tensor::empty({int64_t(bytes)}, DType::u8, device));
    return keep.back().raw_data();
  };
}

// Raw pointers for kernel arguments: float32 per-channel tensors, and optional tensors that pass
// as null when undefined.
inline const float* f32(const Tensor& t) { return t.data<float>(); }
inline float* f32m(const Tensor& t) { return t.data<float>(); }
inline const void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
inline void* raw_or_null_m(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// Inputs of one op must agree in dtype and device.
inline void check_same(const char* op, const Tensor& a, const Tensor& b) {
  if (!b.defined()) return;
  CG_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), "{}: {} and {} differ", op,
           a.str(), b.str());
}

}  // namespace cg::ops::detail
