// Picks the kernel for a tensor's device and dtype, and gives GPU kernels what they need from the
// engine: the current stream and scratch memory. CPU kernels exist for float32 and float64 (the
// latter for gradient checks); GPU kernels for float32, float16 and bfloat16. Anything else fails
// naming the op.
#pragma once
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cudnn.h"

namespace cg::ops::detail {

// A GPU branch is written `if constexpr (kCudaBuild) { if (on_gpu(op, t)) ... }`: discarded in a
// build without the CUDA backend, which then needs no kernels/cuda code to link (kernels/backend.h).
// No CUDA tensor exists in such a build (the allocator refuses the device), so nothing is lost.
using kernels::kCudaBuild;

template <typename F>
void dispatch_floating(const char* op, const Tensor& t, F&& f) {
  CG_CHECK(t.device().is_cpu(), "{}: {} has no implementation on {} in this build", op, t.str(),
           t.device().str());
  switch (t.dtype()) {
    case DType::f32: f.template operator()<float>(); return;
    case DType::f64: f.template operator()<double>(); return;
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
