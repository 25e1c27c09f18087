// linear (fully connected) in the autocast dtype: the implementation (Eigen on the CPU, cuBLAS on
// the GPU) from the linear registry (engine/linear/linear.h), kept by the backward node.
#include "engine/autocast.h"
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/linear/linear.h"
#include "engine/dispatch.h"

namespace cg::ops {
namespace {

class LinearBackward : public autograd::Node {
 public:
  LinearBackward(std::shared_ptr<const impl::LinearImpl> impl, impl::LinearProblem p, Tensor x, Tensor w,
                 bool has_bias)
      : impl_(std::move(impl)), p_(p), x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias) {}
  std::string name() const override { return "LinearBackward"; }
  void release_saved() override { x_ = w_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    impl::LinearBackwardArgs a{.dy = dy, .x = x_, .w = w_};
    if (needs_grad(0)) a.dx = Tensor::empty(x_.shape(), x_.dtype(), x_.device());
    a.dw = Tensor::empty(w_.shape(), w_.dtype(), w_.device());
    if (has_bias_) a.db = Tensor::empty({p_.n}, w_.dtype(), w_.device());
    impl_->backward(p_, a);
    return {a.dx, a.dw, a.db};
  }

 private:
  std::shared_ptr<const impl::LinearImpl> impl_;  // the implementation that ran the forward
  impl::LinearProblem p_;
  Tensor x_, w_;
  bool has_bias_;
};

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  CG_CHECK(x_in.dim() == 2 && weight_in.dim() == 2 && x_in.size(1) == weight_in.size(1),
           "linear: input {} does not match weight {}", x_in.str(), weight_in.str());
  const DType dt = autocast::compute_dtype(x_in);
  const Tensor x = cast(x_in, dt), weight = cast(weight_in, dt);
  const Tensor bias = bias_in.defined() ? cast(bias_in, dt) : Tensor();
  detail::check_same("linear", x, weight);
  detail::check_same("linear", x, bias);
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  if (bias.defined()) CG_CHECK(bias.numel() == n, "linear: bias {} for {} outputs", bias.str(), n);
  if (x.device().is_cuda()) detail::on_gpu("linear", x);  // names the op on a dtype the GPU lacks
  const impl::LinearProblem p{m, k, n, x.device(), dt};
  auto implementation = impl::linear_registry().pick(p, impl::linear_selection(p), [&] {
    return fmt::format("linear layer with input {} and weight {}", x.str(), weight.str());
  });
  impl::LinearForwardArgs a{.x = x, .w = weight, .b = bias, .y = Tensor::empty({m, n}, x.dtype(), x.device())};
  implementation->forward(p, a);
  Tensor& y = a.y;
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<LinearBackward>(std::move(implementation), p, x.detach(), weight.detach(),
                                                 bias.defined());
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
