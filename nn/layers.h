// The layers MiniResNet is made of, with PyTorch's parameter names, shapes and initialization
// (see shared/docs/miniresnet.md): Conv2d (Kaiming-normal, fan_out, ReLU gain), BatchNorm2d
// (weight 1, bias 0, eps 1e-5, momentum 0.1), Linear (uniform +-1/sqrt(fan_in)).
#pragma once
#include "engine/ops.h"
#include "engine/random.h"
#include "nn/module.h"

namespace cg::nn {

// Each module's options are a struct written with designated initializers
// (Conv2dOptions{.in_channels = 3, .out_channels = 16, .kernel_size = 3}). How the module runs (the
// activations' layout, which kernels, autocast) is not among them: that is the execution context
// around its forward (engine/execution.h).
struct Conv2dOptions {
  int64_t in_channels, out_channels, kernel_size;
  int64_t stride = 1, padding = 0;
  bool bias = false;
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
  // PyTorch's BatchNorm2d(num_features, eps, momentum).
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
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
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

struct LinearOptions {
  int64_t in_features, out_features;
  bool bias = true;
};

class Linear : public Module {
 public:
  Linear(const LinearOptions& options, Generator& gen);
  Tensor forward(const Tensor& x) override;

 private:
  Tensor weight_, bias_;
};

}  // namespace cg::nn
