// Global average pooling (NCHW or channels-last; the CPU reference, kernels/cpu/pool.h, or the CUDA
// kernels, kernels/cuda/head.h, by the tensor's device) and the differentiable reshapes (flatten)
// of the classifier head.
#include <algorithm>

#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/dispatch.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/head.h"

namespace cg::ops {
namespace {

namespace cpu = kernels::cpu;
namespace cu = kernels::cuda;

// [N, C, H, W] (or [N, H, W, C]) -> [N, C].
struct PoolShape {
  int64_t n = 1, c = 1, hw = 1;
  Layout layout;
};

void pool_forward(const PoolShape& p, const Tensor& x, Tensor& y) {
  const bool nhwc = p.layout == Layout::nhwc;
  detail::on_device(
      "global_avg_pool", x,
      [&]<typename T>() {
        if (nhwc) cpu::global_avg_pool_nhwc_forward<T>(p.n, p.hw, p.c, x.data<T>(), y.data<T>());
        else cpu::global_avg_pool_forward<T>(p.n * p.c, p.hw, x.data<T>(), y.data<T>());
      },
      [&] {
        const auto stream = detail::stream_of(x);
        if (nhwc) cu::global_avg_pool_nhwc_forward(p.n, p.hw, p.c, x.dtype(), x.raw_data(), y.raw_data(), stream);
        else cu::global_avg_pool_forward(p.n * p.c, p.hw, x.dtype(), x.raw_data(), y.raw_data(), stream);
      });
}

void pool_backward(const PoolShape& p, const Tensor& dy, Tensor& dx) {
  const bool nhwc = p.layout == Layout::nhwc;
  detail::on_device(
      "global_avg_pool backward", dy,
      [&]<typename T>() {
        if (nhwc) cpu::global_avg_pool_nhwc_backward<T>(p.n, p.hw, p.c, dy.data<T>(), dx.data<T>());
        else cpu::global_avg_pool_backward<T>(p.n * p.c, p.hw, dy.data<T>(), dx.data<T>());
      },
      [&] {
        const auto stream = detail::stream_of(dy);
        if (nhwc) cu::global_avg_pool_nhwc_backward(p.n, p.hw, p.c, dy.dtype(), dy.raw_data(), dx.raw_data(), stream);
        else cu::global_avg_pool_backward(p.n * p.c, p.hw, dy.dtype(), dy.raw_data(), dx.raw_data(), stream);
      });
}

class GlobalAvgPoolBackward : public autograd::Node {
 public:
  GlobalAvgPoolBackward(PoolShape p, Shape x_shape) : p_(p), x_shape_(std::move(x_shape)) {}
  std::string name() const override { return "GlobalAvgPoolBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(x_shape_, dy.dtype(), dy.device());
    pool_backward(p_, dy, dx);
    return {dx};
  }

 private:
  PoolShape p_;
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
  const Layout layout = execution().layout;
  const bool nhwc = layout == Layout::nhwc;
  CG_CHECK(x.dim() == 4, "global_avg_pool: input {} must be 4-D ({})", x.str(), nhwc ? "NHWC" : "NCHW");
  const PoolShape p{x.size(0), x.size(nhwc ? 3 : 1), nhwc ? x.size(1) * x.size(2) : x.size(2) * x.size(3), layout};
  Tensor y = Tensor::empty({p.n, p.c}, x.dtype(), x.device());
  pool_forward(p, x, y);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<GlobalAvgPoolBackward>(p, x.shape()), {&x});
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
