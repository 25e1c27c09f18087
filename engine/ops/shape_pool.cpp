// Global average pooling (NCHW or channels-last; the implementation from the pooling registry,
// engine/impl/pool.h, kept by the backward node) and the differentiable reshapes (flatten) of the
// classifier head.
#include <algorithm>

#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/impl/pool.h"
#include "engine/ops/dispatch.h"

namespace cg::ops {
namespace {

class GlobalAvgPoolBackward : public autograd::Node {
 public:
  GlobalAvgPoolBackward(std::shared_ptr<const impl::PoolImpl> impl, impl::PoolProblem p, Shape x_shape)
      : impl_(std::move(impl)), p_(p), x_shape_(std::move(x_shape)) {}
  std::string name() const override { return "GlobalAvgPoolBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(x_shape_, dy.dtype(), dy.device());
    impl_->backward(p_, dy, dx);
    return {dx};
  }

 private:
  std::shared_ptr<const impl::PoolImpl> impl_;  // the implementation that ran the forward
  impl::PoolProblem p_;
  Shape x_shape_;
};

class ReshapeBackward : public autograd::Node {
 public:
  explicit ReshapeBackward(Shape x_shape) : x_shape_(std::move(x_shape)) {}
  std::string name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy.view(x_shape_)}; }

 private:
  Shape x_shape_;
};

}  // namespace

Tensor global_avg_pool(const Tensor& x, Layout layout) {
  const bool nhwc = layout == Layout::nhwc;
  CG_CHECK(x.dim() == 4, "global_avg_pool: input {} must be 4-D ({})", x.str(), nhwc ? "NHWC" : "NCHW");
  if (x.device().is_cuda()) detail::on_gpu("global_avg_pool", x);  // names the op on a dtype the GPU lacks
  const impl::PoolProblem p{x.size(0), x.size(nhwc ? 3 : 1), nhwc ? x.size(1) * x.size(2) : x.size(2) * x.size(3),
                            x.device(), x.dtype(), layout};
  auto implementation = impl::pool_registry().pick(
      p, impl::Choice::automatic, [&] { return fmt::format("global_avg_pool layer with input {}", x.str()); });
  Tensor y = Tensor::empty({p.n, p.c}, x.dtype(), x.device());
  implementation->forward(p, x, y);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<GlobalAvgPoolBackward>(std::move(implementation), p, x.shape()), {&x});
  return y;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = x.view(shape);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ReshapeBackward>(x.shape()), {&x});
  return y;
}

Tensor flatten(const Tensor& x) {
  CG_CHECK(x.dim() >= 1, "flatten: needs a batch dimension, got {}", x.str());
  return reshape(x, {x.size(0), x.numel() / std::max<int64_t>(x.size(0), 1)});
}

}  // namespace cg::ops
