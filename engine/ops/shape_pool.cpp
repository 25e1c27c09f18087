// Global average pooling (NCHW or channels-last) and the differentiable reshapes (flatten) of the
// classifier head.
#include <algorithm>

#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/head.h"

namespace cg::ops {
namespace {

class GlobalAvgPoolBackward : public autograd::Node {
 public:
  GlobalAvgPoolBackward(Shape x_shape, Layout layout) : x_shape_(std::move(x_shape)), layout_(layout) {}
  std::string name() const override { return "GlobalAvgPoolBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(x_shape_, dy.dtype(), dy.device());
    const int64_t n = dy.size(0), c = dy.size(1), hw = dx.numel() / std::max<int64_t>(n * c, 1);
    const bool nhwc = layout_ == Layout::nhwc;
    if (detail::on_gpu("global_avg_pool backward", dy)) {
      const auto stream = detail::stream_of(dy);
      if (nhwc)
        kernels::cuda::global_avg_pool_nhwc_backward(n, hw, c, dy.dtype(), dy.raw_data(), dx.raw_data(), stream);
      else
        kernels::cuda::global_avg_pool_backward(n * c, hw, dy.dtype(), dy.raw_data(), dx.raw_data(), stream);
      return {dx};
    }
    detail::dispatch_floating("global_avg_pool backward", dy, [&]<typename T>() {
      if (nhwc) kernels::cpu::global_avg_pool_nhwc_backward<T>(n, hw, c, dy.data<T>(), dx.data<T>());
      else kernels::cpu::global_avg_pool_backward<T>(n * c, hw, dy.data<T>(), dx.data<T>());
    });
    return {dx};
  }

 private:
  Shape x_shape_;
  Layout layout_;
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
  const int64_t n = x.size(0), c = x.size(nhwc ? 3 : 1), hw = nhwc ? x.size(1) * x.size(2) : x.size(2) * x.size(3);
  Tensor y = Tensor::empty({n, c}, x.dtype(), x.device());
  if (detail::on_gpu("global_avg_pool", x)) {
    const auto stream = detail::stream_of(x);
    if (nhwc) kernels::cuda::global_avg_pool_nhwc_forward(n, hw, c, x.dtype(), x.raw_data(), y.raw_data(), stream);
    else kernels::cuda::global_avg_pool_forward(n * c, hw, x.dtype(), x.raw_data(), y.raw_data(), stream);
  } else {
    detail::dispatch_floating("global_avg_pool", x, [&]<typename T>() {
      if (nhwc) kernels::cpu::global_avg_pool_nhwc_forward<T>(n, hw, c, x.data<T>(), y.data<T>());
      else kernels::cpu::global_avg_pool_forward<T>(n * c, hw, x.data<T>(), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<GlobalAvgPoolBackward>(x.shape(), layout), {&x});
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
