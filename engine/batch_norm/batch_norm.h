// The batch-norm family: the interface every batch_norm implementation offers, its registry and
// its rule (batch_norm_selection). Built in: the CPU reference, the hand-written GPU kernels
// (kernels.batch_norm=auto's) and cuDNN (training forward and backward, eval forward; it has no
// eval-mode backward, so a layer that needs one is refused under kernels.batch_norm=cudnn rather
// than quietly run by another implementation).
// ops::batch_norm picks one per call and its backward node keeps it.
#pragma once
#include <string>

#include "engine/registry.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/types.h"

namespace cg::impl {

struct BatchNormProblem {
  kernels::BatchNormShape shape;  // channels-last runs over kernels::channels_last_shape
  Device device;
  DType dtype;  // of x, y, the residual and their gradients
  ops::Layout layout;
  bool training = true;
  bool needs_backward = false;  // an input requires grad
  Activation activation = Activation::none;
  bool residual = false;
  bool cross_replica = false;  // SyncBatchNorm: training statistics summed over the replicas
  ops::KernelPolicy policy;    // kernels.batch_norm picks the GPU implementation
  std::string layer;  // "batch_norm layer with input [...]"
};

// The forward's tensors. Per-channel ones are float32 on the GPU, x's dtype on the CPU.
// Training writes save_mean/save_invstd and updates running_mean/running_var; eval reads them.
struct BatchNormForwardArgs {
  Tensor x, residual, weight, bias, running_mean, running_var;
  double eps = 1e-5, momentum = 0.1;
  Tensor y{}, save_mean{}, save_invstd{};  // outputs, allocated by the op before the call
};

// The backward's tensors. Training: mean/stat are the batch mean and invstd; eval: the running
// mean and var as they were at the forward. relu_y: the fused ReLU's output, or undefined.
// d_residual is written when there is a residual.
struct BatchNormBackwardArgs {
  Tensor dy, x, gamma, mean, stat, relu_y;
  double eps = 1e-5;
  Tensor dx{}, dgamma{}, dbeta{}, d_residual{};  // outputs, allocated by the op before the call
};

class BatchNormImpl : public Supports<BatchNormProblem> {
 public:
  virtual void forward(const BatchNormProblem& p, BatchNormForwardArgs& a) const = 0;
  virtual void backward(const BatchNormProblem& p, BatchNormBackwardArgs& a) const = 0;

  // SyncBatchNorm (p.cross_replica, training): each direction in two phases around the sum over
  // replicas (engine/cross_replica.h), float64 vectors on the layer's device, with the
  // semantics of the CPU reference's batch_norm_local_moments & co. (kernels/cpu/batch_norm.h):
  // local_moments fills moments [2C + 1] (sum x, sum x^2 per channel, this replica's count);
  // forward_with_moments normalizes with the summed ones and updates the running statistics;
  // local_grad_sums writes dgamma, dbeta (this replica's), d_residual and sums [2C] (sum g,
  // sum g * xhat); backward_with_sums writes dx from the summed sums and moments[2C] (the
  // global count, as the forward's sum left it). An implementation without them refuses the
  // layer in refusal().
  virtual void local_moments(const BatchNormProblem& p, const BatchNormForwardArgs& a, const Tensor& moments) const;
  virtual void forward_with_moments(const BatchNormProblem& p, const BatchNormForwardArgs& a,
                                    const Tensor& moments) const;
  virtual void local_grad_sums(const BatchNormProblem& p, const BatchNormBackwardArgs& a, const Tensor& sums) const;
  virtual void backward_with_sums(const BatchNormProblem& p, const BatchNormBackwardArgs& a, const Tensor& sums,
                                  const Tensor& moments) const;
};

using BatchNormRegistry = Registry<BatchNormImpl>;
using BatchNormEntry = BatchNormRegistry::Entry;
// The registry, built with the implementations of this build on first use.
BatchNormRegistry& batch_norm_registry();

// The rule: the CPU reference; on the GPU kernels.batch_norm by name, or under auto the
// hand-written kernels (deterministic, and they fuse the residual and ReLU), else cuDNN.
Selection batch_norm_selection(const BatchNormProblem& p);
// The implementation batch_norm_selection(p) prefers, or the refusal naming p.layer.
std::shared_ptr<const BatchNormImpl> pick_batch_norm(const BatchNormProblem& p);

BatchNormEntry batch_norm_cpu_entry();
BatchNormEntry batch_norm_native_entry();
BatchNormEntry batch_norm_cudnn_entry();

}  // namespace cg::impl
