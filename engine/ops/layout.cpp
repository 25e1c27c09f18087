// to_layout, the differentiable NCHW <-> NHWC conversion (its backward converts the gradient
// back), and the unrecorded layout copies other ops use (engine/ops/layout.h).
#include "engine/ops/layout.h"

#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/dispatch.h"
#include "kernels/cpu/layout.h"
#include "kernels/cuda/layout.h"

namespace cg::ops {
namespace detail {
namespace {

// y [batches, cols, rows] in `dtype` from x viewed as [batches, rows, cols].
Tensor transposed(const Tensor& x, int64_t batches, int64_t rows, int64_t cols, const Shape& y_shape, DType dtype) {
  return on_device(
      "layout change", x,
      [&]<typename T>() {
        Tensor y = Tensor::empty(y_shape, x.dtype(), x.device());
        kernels::cpu::batched_transpose<T>(batches, rows, cols, x.data<T>(), y.data<T>());
        return y.to(dtype);  // the CPU computes in the input's dtype; a conversion, when asked, is a second pass
      },
      [&] {
        Tensor y = Tensor::empty(y_shape, dtype, x.device());
        kernels::cuda::batched_transpose(batches, rows, cols, x.dtype(), x.raw_data(), dtype, y.raw_data(), stream_of(x));
        return y;
      });
}

}  // namespace

Tensor to_channels_last(const Tensor& x, DType dtype) {
  CG_CHECK(x.dim() == 4, "to_channels_last: {} must be 4-D", x.str());
  return transposed(x, x.size(0), x.size(1), x.size(2) * x.size(3), {x.size(0), x.size(2), x.size(3), x.size(1)},
                    dtype);
}

Tensor to_channels_first(const Tensor& x, DType dtype) {
  CG_CHECK(x.dim() == 4, "to_channels_first: {} must be 4-D", x.str());
  return transposed(x, x.size(0), x.size(1) * x.size(2), x.size(3), {x.size(0), x.size(3), x.size(1), x.size(2)},
                    dtype);
}

}  // namespace detail

namespace {

class ToLayoutBackward : public autograd::Node {
 public:
  explicit ToLayoutBackward(Layout to) : to_(to) {}
  std::string name() const override { return "ToLayoutBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    return {to_ == Layout::nhwc ? detail::to_channels_first(dy, dy.dtype()) : detail::to_channels_last(dy, dy.dtype())};
  }

 private:
  Layout to_;  // the forward's target layout; the gradient goes back from it
};

}  // namespace

Tensor to_layout(const Tensor& x, Layout from, Layout to) {
  if (from == to) return x;
  CG_CHECK(x.dim() == 4, "to_layout: {} must be a 4-D image batch", x.str());
  Tensor y = to == Layout::nhwc ? detail::to_channels_last(x, x.dtype()) : detail::to_channels_first(x, x.dtype());
  if (autograd::any_requires_grad({&x})) autograd::connect(y, std::make_shared<ToLayoutBackward>(to), {&x});
  return y;
}

}  // namespace cg::ops
