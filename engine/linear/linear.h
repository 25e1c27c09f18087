// The linear (fully connected) family: the interface, its registry and its rule. Built in: the
// CPU reference (Eigen), and on the GPU cuBLAS, ahead of cudagrad's own kernel (which takes over
// where cuBLAS is not in the build, as on the emulated GPU); there is no kernels.* key for it.
// Tensors are in the compute dtype (autocast's casts are recorded by ops::linear itself).
#pragma once
#include <string>

#include "engine/registry.h"
#include "engine/tensor.h"

namespace cg::impl {

struct LinearProblem {
  int64_t m = 1, k = 1, n = 1;  // x [m, k], weight [n, k] -> y [m, n]
  Device device;
  DType dtype;
};

// One call's tensors, inputs first; the op allocates the outputs before the call.
struct LinearForwardArgs {
  Tensor x, w, b;  // b may be undefined
  Tensor y{};      // out
};
struct LinearBackwardArgs {
  Tensor dy, x, w;
  Tensor dx{}, dw{}, db{};  // out; dx and db undefined when not wanted (or no bias)
};

class LinearImpl : public Supports<LinearProblem> {
 public:
  virtual void forward(const LinearProblem& p, LinearForwardArgs& a) const = 0;
  virtual void backward(const LinearProblem& p, LinearBackwardArgs& a) const = 0;
};

using LinearRegistry = Registry<LinearImpl>;
// The registry, built with the implementations of this build on first use.
LinearRegistry& linear_registry();
// The rule: the CPU reference; on the GPU cuBLAS, else the native kernel.
Selection linear_selection(const LinearProblem& p);

// The GPU's entries, defined only in builds that compile them (linear_cublas.cpp where cuBLAS is
// linked, linear_native_cuda.cpp with a CUDA backend).
LinearRegistry::Entry linear_cublas_entry();
LinearRegistry::Entry linear_native_entry();

}  // namespace cg::impl
