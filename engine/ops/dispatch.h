// Picks the kernel for a tensor's device and dtype. CPU kernels exist for float32 and float64 (the
// latter for gradient checks); GPU kernels for float32, for the ops that have one so far;
// anything else fails naming the op.
#pragma once
#include "engine/tensor.h"

namespace cg::ops::detail {

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

// True for a CUDA tensor, whose op then runs the GPU kernel (float32 only so far).
inline bool on_gpu(const char* op, const Tensor& t) {
  if (!t.device().is_cuda()) return false;
  CG_CHECK(t.dtype() == DType::f32, "{}: {} on the GPU needs float32", op, t.str());
  return true;
}

// Inputs of one op must agree in dtype and device.
inline void check_same(const char* op, const Tensor& a, const Tensor& b) {
  if (!b.defined()) return;
  CG_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), "{}: {} and {} differ", op,
           a.str(), b.str());
}

}  // namespace cg::ops::detail
