// The pooling family (global average pooling, the classifier head's): the interface and its
// registry. Built in: the CPU reference and the CUDA kernels, NCHW and channels-last each; there
// is no kernels.* key for it, so each device's only implementation is picked.
#pragma once
#include <string>

#include "engine/impl/registry.h"
#include "engine/tensor.h"

namespace cg::impl {

struct PoolProblem {
  int64_t n = 1, c = 1, hw = 1;  // [N, C, H, W] (or [N, H, W, C]) -> [N, C]
  Device device;
  DType dtype;
  ops::Layout layout;
};

class PoolImpl {
 public:
  virtual ~PoolImpl() = default;
  virtual std::string why_unsupported(const PoolProblem& p) const = 0;
  virtual void forward(const PoolProblem& p, const Tensor& x, Tensor& y) const = 0;
  virtual void backward(const PoolProblem& p, const Tensor& dy, Tensor& dx) const = 0;
};

using PoolRegistry = Registry<PoolImpl>;
PoolRegistry& pool_registry();

void register_pool_cpu(PoolRegistry& r);
void register_pool_cuda(PoolRegistry& r);

}  // namespace cg::impl
