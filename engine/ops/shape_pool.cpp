// Global average pooling and the differentiable reshapes (flatten) of the classifier head.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/head.h"

namespace cg::ops {
namespace {

class GlobalAvgPoolBackward : public autograd::Node {
 public:
  explicit GlobalAvgPoolBackward(Shape x_shape) : x_shape_(std::move(x_shape)) {}
  std::string name() const override { return "GlobalAvgPoolBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(x_shape_, dy.dtype(), dy.device());
    const int64_t hw = x_shape_[2] * x_shape_[3];
    if (detail::on_gpu("global_avg_pool backward", dy)) {
      kernels::cuda::global_avg_pool_backward(dy.numel(), hw, dy.dtype(), dy.raw_data(), dx.raw_data(),
                                              detail::stream_of(dy));
      return {dx};
    }
    detail::dispatch_floating("global_avg_pool backward", dy, [&]<typename T>() {
      kernels::cpu::global_avg_pool_backward<T>(dy.numel(), hw, dy.data<T>(), dx.data<T>());
    });
    return {dx};
  }

 private:
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

Tensor global_avg_pool(const Tensor& x) {
  CG_CHECK(x.dim() == 4, "global_avg_pool: input {} must be 4-D (NCHW)", x.str());
  Tensor y = Tensor::empty({x.size(0), x.size(1)}, x.dtype(), x.device());
  const int64_t nc = x.size(0) * x.size(1), hw = x.size(2) * x.size(3);
  if (detail::on_gpu("global_avg_pool", x)) {
    kernels::cuda::global_avg_pool_forward(nc, hw, x.dtype(), x.raw_data(), y.raw_data(), detail::stream_of(x));
  } else {
    detail::dispatch_floating("global_avg_pool", x, [&]<typename T>() {
      kernels::cpu::global_avg_pool_forward<T>(nc, hw, x.data<T>(), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<GlobalAvgPoolBackward>(x.shape()), {&x});
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
