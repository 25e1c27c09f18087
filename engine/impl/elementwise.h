// The elementwise family (relu, add, add_relu, scale, gradient accumulation): the interface and
// its registry. Built in: the CPU reference and the CUDA kernels; there is no kernels.* key for
// it, so each device's only implementation is picked. All tensors of one call have the same
// shape, dtype and device; n is their element count.
#pragma once
#include <string>

#include "engine/impl/registry.h"
#include "engine/tensor.h"

namespace cg::impl {

struct ElementwiseProblem {
  int64_t n = 0;
  Device device;
  DType dtype;
};

class ElementwiseImpl {
 public:
  virtual ~ElementwiseImpl() = default;
  virtual std::string why_unsupported(const ElementwiseProblem& p) const = 0;
  virtual void relu(const ElementwiseProblem& p, const Tensor& x, Tensor& y) const = 0;
  // dx = dy where y > 0, else 0.
  virtual void relu_backward(const ElementwiseProblem& p, const Tensor& dy, const Tensor& y, Tensor& dx) const = 0;
  virtual void add(const ElementwiseProblem& p, const Tensor& a, const Tensor& b, Tensor& y) const = 0;
  virtual void add_relu(const ElementwiseProblem& p, const Tensor& a, const Tensor& b, Tensor& y) const = 0;
  virtual void scale(const ElementwiseProblem& p, const Tensor& x, double alpha, Tensor& y) const = 0;
  virtual void accumulate(const ElementwiseProblem& p, const Tensor& src, Tensor& dst) const = 0;  // dst += src
};

using ElementwiseRegistry = Registry<ElementwiseImpl>;
ElementwiseRegistry& elementwise_registry();

void register_elementwise_cpu(ElementwiseRegistry& r);
void register_elementwise_cuda(ElementwiseRegistry& r);

}  // namespace cg::impl
