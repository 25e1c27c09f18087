// Runs the backward pass over the graph recorded by the forward.
#pragma once
#include "engine/tensor.h"

namespace cg::autograd {

// Propagates `grad_output` (ones for a scalar `root` when undefined) back through root's graph,
// accumulating into the .grad of every leaf that requires grad, and firing grad-ready hooks the
// moment each leaf's gradient is complete. The graph's saved tensors are freed as it goes.
void backward(const Tensor& root, const Tensor& grad_output);

}  // namespace cg::autograd
