// The loss family (cross-entropy over logits [n, classes] and int64 labels, with the hit count
// for accuracy): the interface and its registry. Built in: the CPU reference and the CUDA kernels;
// there is no kernels.* key for it, so each device's only implementation is picked. On the GPU
// the loss is computed in float32 (ops::cross_entropy casts half logits first).
#pragma once
#include <string>

#include "engine/impl/registry.h"
#include "engine/tensor.h"

namespace cg::impl {

struct LossProblem {
  int64_t n = 1, classes = 1;
  Device device;
  DType dtype;  // of the logits
};

class LossImpl {
 public:
  virtual ~LossImpl() = default;
  virtual std::string why_unsupported(const LossProblem& p) const = 0;
  // Writes loss (a scalar), probs [n, classes] (softmax, kept for the backward) and hits (int64
  // scalar). A label outside [0, classes) is an error (on the GPU reported at the next host read).
  virtual void forward(const LossProblem& p, const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs,
                       Tensor& hits) const = 0;
  // dlogits = dloss * (probs - one_hot(labels)) / n; dloss is a scalar on the logits' device.
  virtual void backward(const LossProblem& p, const Tensor& dloss, const Tensor& probs, const Tensor& labels,
                        Tensor& dlogits) const = 0;
};

using LossRegistry = Registry<LossImpl>;
LossRegistry& loss_registry();

void register_loss_cpu(LossRegistry& r);
void register_loss_cuda(LossRegistry& r);

}  // namespace cg::impl
