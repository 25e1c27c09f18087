// Mixed precision in the manner of torch.autocast: inside an enabled scope, the ops that gain from
// half precision (conv2d, linear) cast their floating inputs on the GPU to the scope's dtype, and
// cross_entropy computes in float32. Parameters stay float32 (the master weights): their half
// copies are made by a differentiable cast, whose backward brings the gradient back to float32.
// Batch norm takes half activations with float32 parameters as they come, and elementwise ops
// follow their inputs. CPU tensors are never cast: the CPU trains in float32.
// Autocast is one part of the thread's execution context (engine/execution.h); Scope changes only
// that part.
#pragma once
#include "engine/execution.h"
#include "engine/tensor.h"

namespace cg::autocast {

bool enabled();
DType dtype();  // the half type of the innermost enabled scope

struct ScopeOptions {
  // false makes a scope that turns autocast off (e.g. around evaluation code that wants float32),
  // like torch.autocast(enabled=False).
  bool enabled = true;
  DType dtype = DType::f16;  // the half type: float16 or bfloat16
};

// The current execution context with autocast set to `options`, for the scope's life.
class Scope {
 public:
  explicit Scope(ScopeOptions options)
      : scope_(ops::execution().with_autocast({.enabled = options.enabled, .dtype = options.dtype})) {}

 private:
  ops::ExecutionScope scope_;
};

// The dtype an autocast op computes in for `t`: the scope's half type for a floating CUDA tensor
// inside an enabled scope, else t's own dtype.
DType compute_dtype(const Tensor& t);

}  // namespace cg::autocast
