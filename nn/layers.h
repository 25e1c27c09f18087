// The layers MiniResNet is made of, with PyTorch's parameter names, shapes and initialization
// (see shared/docs/miniresnet.md): Conv2d (Kaiming-normal, fan_out, ReLU gain), BatchNorm2d
// (weight 1, bias 0, eps 1e-5, momentum 0.1), Linear (uniform +-1/sqrt(fan_in)).
#pragma once
#include "engine/ops.h"
#include "engine/random.h"
#include "nn/module.h"

namespace cg::nn {

struct Conv2dOptions {
  int64_t in_channels, out_channels, kernel_size;
  int64_t stride = 1, padding = 0;
  bool bias = false;
  // Of the activations in and out; the weight is [out, in, k, k] either way (same state dict).
  ops::Layout layout = ops::Layout::nchw;
  ops::KernelPolicy kernels{};  // which convolution runs (kernels.conv, cpu_conv, cudnn_algo_search)
};

class Conv2d : public Module {
 public:
  Conv2d(const Conv2dOptions& options, Generator& gen);
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }

 private:
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

class BatchNorm2d : public Module {
 public:
  // layout: of the activations this module normalizes (the parameters are [C] either way);
  // kernels: which implementation runs it (kernels.batch_norm).
  explicit BatchNorm2d(int64_t channels, ops::Layout layout = ops::Layout::nchw, double eps = 1e-5,
                       double momentum = 0.1, const ops::KernelPolicy& kernels = {});
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)) in one fused pass; the same result and state-dict as separate modules.
  Tensor forward_relu(const Tensor& x);
  // relu(forward(x) + residual) in one fused pass (ops::batch_norm_add_relu).
  Tensor forward_add_relu(const Tensor& x, const Tensor& residual);
  // SyncBatchNorm (PyTorch's convert_sync_batchnorm): in training mode the statistics and the
  // backward's gradient sums are summed over replicas through `sum` (null: this process only).
  void set_cross_replica(std::shared_ptr<CrossReplicaSum> sum) { cross_replica_ = std::move(sum); }

 private:
  ops::BatchNormOptions options(ops::Activation act) const;

  std::shared_ptr<CrossReplicaSum> cross_replica_;
  ops::Layout layout_;
  double eps_, momentum_;
  ops::KernelPolicy kernels_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) override;

 private:
  Tensor weight_, bias_;
};

}  // namespace cg::nn
