// batch_norm and batch_norm_add_relu: training mode (batch statistics, running-stat update) and
// eval mode, NCHW or channels-last. The implementation (CPU reference, hand-written GPU kernels,
// cuDNN) comes from the batch-norm registry (engine/batch_norm/batch_norm.h) under the options'
// KernelPolicy, in both modes, and the backward node keeps the one that ran.
// On the GPU the activations may be half while the parameters and statistics stay float32
// (mixed precision). Channels-last is the same computation over the shape {N * H * W, C, 1}.
// SyncBatchNorm (options.cross_replica, training only): each direction runs the implementation's
// local phase, one sum over replicas of a float64 vector per layer (moments forward, the two
// gradient sums backward), then its second phase; the backward node keeps the hook and the
// summed moments (their last entry is the global count).
#include "engine/autograd/node.h"
#include "engine/batch_norm/batch_norm.h"
#include "engine/ops.h"
#include "engine/dispatch.h"
#include "kernels/cuda/counter.h"

namespace cg::ops {
namespace {

using kernels::BatchNormShape;

class BatchNormBackward : public autograd::Node {
 public:
  // What the forward saved (see impl::BatchNormBackwardArgs for mean/stat/relu_y). A fused
  // residual is the fourth input; its gradient is the one reaching the normalization.
  struct Saved {
    Tensor x, gamma, mean, stat, relu_y;
    double eps;
    std::shared_ptr<CrossReplicaSum> cross_replica;  // SyncBatchNorm, else null
    Tensor moments;                                   // SyncBatchNorm: the summed forward moments
  };
  BatchNormBackward(std::shared_ptr<const impl::BatchNormImpl> impl, impl::BatchNormProblem problem, Saved saved)
      : impl_(std::move(impl)), p_(std::move(problem)), v_(std::move(saved)) {}
  std::string name() const override { return p_.residual ? "BatchNormAddReluBackward" : "BatchNormBackward"; }
  void release_saved() override {
    v_.x = v_.gamma = v_.mean = v_.stat = v_.relu_y = v_.moments = {};
    v_.cross_replica.reset();
  }

  std::vector<Tensor> apply(const Tensor& dy) override {
    const Tensor& x = v_.x;
    impl::BatchNormBackwardArgs a{
        .dy = dy, .x = x, .gamma = v_.gamma, .mean = v_.mean, .stat = v_.stat, .relu_y = v_.relu_y, .eps = v_.eps};
    a.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    a.dgamma = Tensor::empty({p_.shape.c}, v_.gamma.dtype(), x.device());
    a.dbeta = Tensor::empty({p_.shape.c}, v_.gamma.dtype(), x.device());
    // Written whenever there is a residual, needed or not: the kernels' dx pass reads it back.
    if (p_.residual) a.d_residual = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (v_.cross_replica) {
      Tensor sums = Tensor::empty({2 * p_.shape.c}, DType::f64, x.device());
      impl_->local_grad_sums(p_, a, sums);
      v_.cross_replica->sum(sums, CrossReplicaSum::Pass::backward);
      impl_->backward_with_sums(p_, a, sums, v_.moments);
    } else {
      impl_->backward(p_, a);
    }
    std::vector<Tensor> grads(p_.residual ? 4 : 3);
    if (needs_grad(0)) grads[0] = a.dx;
    if (needs_grad(1)) grads[1] = a.dgamma;
    if (needs_grad(2)) grads[2] = a.dbeta;
    if (needs_grad(3)) grads[3] = a.d_residual;
    return grads;
  }

 private:
  std::shared_ptr<const impl::BatchNormImpl> impl_;  // the implementation that ran the forward
  impl::BatchNormProblem p_;
  Saved v_;
};

// Per-channel tensors: on the CPU the input's dtype; on the GPU float32 whatever the input's.
void check_channel_tensor(const Tensor& x, const Tensor& t, int64_t c) {
  CG_CHECK(t.defined() && t.numel() == c, "batch_norm: per-channel tensor {} for {} channels", t.str(), c);
  if (x.device().is_cuda())
    CG_CHECK(t.device() == x.device() && t.dtype() == DType::f32,
             "batch_norm: {} must be float32 on {} (input {})", t.str(), x.device().str(), x.str());
  else
    detail::check_same("batch_norm", x, t);
}

BatchNormShape shape_of(const Tensor& x, Layout layout) {
  CG_CHECK(x.dim() == 4, "batch_norm: input {} must be 4-D ({})", x.str(),
           layout == Layout::nhwc ? "NHWC" : "NCHW");
  if (layout == Layout::nhwc)
    return kernels::channels_last_shape(x.size(0), x.size(1), x.size(2), x.size(3));
  return {x.size(0), x.size(1), x.size(2) * x.size(3)};
}

impl::BatchNormProblem problem_of(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                                  const BatchNormShape& s, const BatchNormOptions& options) {
  impl::BatchNormProblem p;
  p.shape = s;
  p.device = x.device();
  p.dtype = x.dtype();
  p.layout = execution().layout;
  p.training = options.training;
  p.needs_backward = autograd::any_requires_grad({&x, &weight, &bias, &residual});
  p.activation = options.activation;
  p.residual = residual.defined();
  p.cross_replica = options.training && options.cross_replica != nullptr;
  p.policy = execution().kernels;
  p.layer = fmt::format("{} layer with input {}", residual.defined() ? "batch_norm_add_relu" : "batch_norm", x.str());
  return p;
}

// Refuses inputs that do not fit together: per-channel tensors of the wrong size, device or
// dtype, a residual unlike x, or too few values per channel for training statistics.
void check_inputs(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, const BatchNormShape& s,
                  const BatchNormOptions& options) {
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) check_channel_tensor(x, *t, s.c);
  if (residual.defined()) {
    detail::check_same("batch_norm_add_relu", x, residual);
    CG_CHECK(residual.shape() == x.shape(), "batch_norm_add_relu: residual {} and input {} differ in shape",
             residual.str(), x.str());
  }
  // SyncBatchNorm counts every replica's values: one here is enough (PyTorch allows it too).
  if (options.training)
    CG_CHECK(s.n * s.hw > (options.cross_replica ? 0 : 1),
             "batch_norm: training needs more than one value per channel, got {}", x.str());
}

// Runs the forward into a.y (and a.save_mean / a.save_invstd in training). SyncBatchNorm: the
// local moments summed over replicas in between; returns them (undefined otherwise).
Tensor run_forward(const impl::BatchNormImpl& implementation, const impl::BatchNormProblem& p,
                   impl::BatchNormForwardArgs& a, const BatchNormOptions& options) {
  const Tensor& x = a.x;
  if (!p.cross_replica) {
    implementation.forward(p, a);
    return Tensor();
  }
  const int64_t c = p.shape.c;
  Tensor moments = Tensor::empty({2 * c + 1}, DType::f64, x.device());
  implementation.local_moments(p, a, moments);
  options.cross_replica->sum(moments, CrossReplicaSum::Pass::forward);
  if (x.device().is_cpu())  // on the GPU the count stays on the device; the kernels clamp
    CG_CHECK(moments.data<double>()[2 * c] > 1,
             "batch_norm: training needs more than one value per channel over all replicas, got {}", x.str());
  implementation.forward_with_moments(p, a, moments);
  return moments;
}

// num_batches_tracked += 1, where the tensor lives.
void count_batch(const Tensor& x, const Tensor& num_batches_tracked) {
  detail::on_device(
      "batch_norm", x.device(), [&] { num_batches_tracked.data<int64_t>()[0] += 1; },
      [&] { kernels::cuda::increment_i64(num_batches_tracked.data<int64_t>(), 1, detail::stream_of(x)); });
}

// Connects a.y to a backward node that keeps what the forward saved and the implementation that ran.
void record_backward(std::shared_ptr<const impl::BatchNormImpl> implementation, const impl::BatchNormProblem& p,
                     impl::BatchNormForwardArgs& a, const Tensor& moments, const BatchNormOptions& options) {
  const Tensor &x = a.x, &residual = a.residual, &weight = a.weight, &bias = a.bias;
  // Eval: copies of the running statistics, so a later update cannot change this backward.
  Tensor mean = options.training ? a.save_mean : a.running_mean.clone();
  Tensor stat = options.training ? a.save_invstd : a.running_var.clone();
  const bool relu = options.activation == Activation::relu;
  auto node = std::make_shared<BatchNormBackward>(
      std::move(implementation), p,
      BatchNormBackward::Saved{x.detach(), weight.detach(), mean, stat, relu ? a.y.detach() : Tensor(), options.eps,
                               p.cross_replica ? options.cross_replica : nullptr, moments});
  if (residual.defined())
    autograd::connect(a.y, node, {&x, &weight, &bias, &residual});
  else
    autograd::connect(a.y, node, {&x, &weight, &bias});
}

// y = act(bn(x) [+ residual]); residual may be undefined.
Tensor batch_norm_impl(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, const Tensor& num_batches_tracked,
                       const BatchNormOptions& options) {
  const BatchNormShape s = shape_of(x, execution().layout);
  const int64_t c = s.c;
  check_inputs(x, residual, weight, bias, running_mean, running_var, s, options);
  const impl::BatchNormProblem p = problem_of(x, residual, weight, bias, s, options);
  if (x.device().is_cuda()) detail::on_gpu("batch_norm", x);  // names the op on a dtype the GPU lacks
  auto implementation = impl::pick_batch_norm(p);
  impl::BatchNormForwardArgs a{.x = x, .residual = residual, .weight = weight, .bias = bias, .running_mean = running_mean,
                           .running_var = running_var, .eps = options.eps, .momentum = options.momentum};
  a.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (options.training) {
    a.save_mean = Tensor::empty({c}, weight.dtype(), x.device());
    a.save_invstd = Tensor::empty({c}, weight.dtype(), x.device());
  }
  const Tensor moments = run_forward(*implementation, p, a, options);
  if (options.training && num_batches_tracked.defined()) count_batch(x, num_batches_tracked);
  if (p.needs_backward) record_backward(std::move(implementation), p, a, moments, options);
  return a.y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& num_batches_tracked, BatchNormOptions options) {
  return batch_norm_impl(x, Tensor(), weight, bias, running_mean, running_var, num_batches_tracked, options);
}

Tensor batch_norm_add_relu(const Tensor& x, const Tensor& residual, const Tensor& weight,
                           const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& num_batches_tracked,
                           BatchNormOptions options) {
  CG_CHECK(residual.defined(), "batch_norm_add_relu: the residual is undefined");
  options.activation = Activation::relu;
  return batch_norm_impl(x, residual, weight, bias, running_mean, running_var, num_batches_tracked, options);
}

}  // namespace cg::ops
