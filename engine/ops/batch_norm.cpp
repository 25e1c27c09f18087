// batch_norm: training mode (batch statistics, running-stat update) and eval mode.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/batchnorm.h"

namespace cg::ops {
namespace {

using kernels::cpu::BatchNormShape;

class BatchNormBackward : public autograd::Node {
 public:
  // Training: `mean`/`invstd` are the saved batch statistics. Eval: they are the running mean and
  // running var (copies, so a later update of the buffers cannot change this backward).
  // relu_y: the fused ReLU's output, undefined without one.
  BatchNormBackward(bool training, Tensor x, Tensor gamma, Tensor mean, Tensor invstd_or_var,
                    Tensor relu_y, double eps, BatchNormShape s)
      : training_(training), x_(std::move(x)), gamma_(std::move(gamma)), mean_(std::move(mean)),
        stat_(std::move(invstd_or_var)), relu_y_(std::move(relu_y)), eps_(eps), s_(s) {}
  std::string name() const override { return "BatchNormBackward"; }
  void release_saved() override { x_ = gamma_ = mean_ = stat_ = relu_y_ = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> grads(3);
    Tensor dx = Tensor::empty(x_.shape(), x_.dtype());
    Tensor dgamma = Tensor::empty({s_.c}, x_.dtype());
    Tensor dbeta = Tensor::empty({s_.c}, x_.dtype());
    detail::dispatch_floating("batch_norm backward", dy, [&]<typename T>() {
      const T* relu_y = relu_y_.defined() ? relu_y_.data<T>() : nullptr;
      if (training_) {
        kernels::cpu::batchnorm_backward_train<T>(s_, dy.data<T>(), x_.data<T>(), gamma_.data<T>(),
                                                  mean_.data<T>(), stat_.data<T>(), dx.data<T>(),
                                                  dgamma.data<T>(), dbeta.data<T>(), relu_y);
      } else {
        kernels::cpu::batchnorm_backward_eval<T>(s_, dy.data<T>(), x_.data<T>(), gamma_.data<T>(),
                                                 mean_.data<T>(), stat_.data<T>(), T(eps_),
                                                 dx.data<T>(), dgamma.data<T>(), dbeta.data<T>(), relu_y);
      }
    });
    if (needs_grad(0)) grads[0] = dx;
    if (needs_grad(1)) grads[1] = dgamma;
    if (needs_grad(2)) grads[2] = dbeta;
    return grads;
  }

 private:
  bool training_;
  Tensor x_, gamma_, mean_, stat_, relu_y_;
  double eps_;
  BatchNormShape s_;
};

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& num_batches_tracked, BatchNormOptions options) {
  CG_CHECK(x.dim() == 4, "batch_norm: input {} must be 4-D (NCHW)", x.str());
  const int64_t c = x.size(1);
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    CG_CHECK(t->defined() && t->numel() == c, "batch_norm: per-channel tensor {} for {} channels",
             t->str(), c);
    detail::check_same("batch_norm", x, *t);
  }
  BatchNormShape s{x.size(0), c, x.size(2) * x.size(3)};
  if (options.training)
    CG_CHECK(s.n * s.hw > 1, "batch_norm: training needs more than one value per channel, got {}",
             x.str());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean, stat;
  detail::dispatch_floating("batch_norm", x, [&]<typename T>() {
    if (options.training) {
      mean = Tensor::empty({c}, x.dtype());
      stat = Tensor::empty({c}, x.dtype());
      kernels::cpu::batchnorm_forward_train<T>(s, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                               T(options.eps), T(options.momentum),
                                               running_mean.data<T>(), running_var.data<T>(),
                                               y.data<T>(), mean.data<T>(), stat.data<T>(),
                                               options.activation);
    } else {
      kernels::cpu::batchnorm_forward_eval<T>(s, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                              running_mean.data<T>(), running_var.data<T>(),
                                              T(options.eps), y.data<T>(), options.activation);
    }
  });
  if (options.training && num_batches_tracked.defined())
    num_batches_tracked.data<int64_t>()[0] += 1;
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    if (!options.training) {
      mean = running_mean.clone();
      stat = running_var.clone();
    }
    const bool relu = options.activation == kernels::cpu::Activation::relu;
    auto node = std::make_shared<BatchNormBackward>(options.training, x.detach(), weight.detach(),
                                                    mean, stat, relu ? y.detach() : Tensor(),
                                                    options.eps, s);
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
