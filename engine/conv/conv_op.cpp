// conv2d and its backward. The implementation (the CPU's im2col, Winograd or direct, hand-written
// GPU kernels, cuDNN) comes from the convolution registry (engine/conv/conv.h) under the execution
// context's layout and KernelPolicy, and the backward node keeps the one that ran the forward. The
// compute dtype follows autocast.
#include "engine/autocast.h"
#include "engine/autograd/node.h"
#include "engine/conv/conv.h"
#include "engine/ops.h"
#include "engine/dispatch.h"

namespace cg::ops {
namespace {

class Conv2dBackward : public autograd::Node {
 public:
  Conv2dBackward(std::shared_ptr<const impl::ConvImpl> impl, impl::ConvProblem problem, impl::ConvSaved saved,
                 bool has_bias)
      : impl_(std::move(impl)), problem_(std::move(problem)), saved_(std::move(saved)), has_bias_(has_bias) {}
  std::string name() const override { return "Conv2dBackward"; }
  void release_saved() override { saved_.x = {}; saved_.w = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    impl::ConvBackwardArgs a{.dy = dy, .saved = saved_, .need_dx = needs_grad(0),
                             .need_w = needs_grad(1) || needs_grad(2), .has_bias = has_bias_};
    impl_->backward(problem_, a);
    return {a.dx, a.dw, a.db};
  }

 private:
  std::shared_ptr<const impl::ConvImpl> impl_;  // the implementation that ran the forward
  impl::ConvProblem problem_;
  impl::ConvSaved saved_;
  bool has_bias_;
};

impl::ConvProblem problem_of(const Tensor& x, const Tensor& weight, const Conv2dFuncOptions& options, DType dt) {
  const ExecutionContext& context = execution();
  const bool nhwc = context.layout == Layout::nhwc;
  impl::ConvProblem p;
  p.shape = {x.size(0), weight.size(1), x.size(nhwc ? 1 : 2), x.size(nhwc ? 2 : 3), weight.size(0),
             weight.size(2), weight.size(3), options.stride, options.padding};
  p.device = x.device();
  p.dtype = dt;
  p.layout = context.layout;
  p.policy = context.kernels;
  p.layer = fmt::format("conv2d layer with {}input {} and weight {} (stride {}, padding {})",
                        nhwc ? "channels-last " : "", x.str(), weight.str(), options.stride, options.padding);
  return p;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& weight, const Tensor& bias_in, Conv2dFuncOptions options) {
  const bool nhwc = execution().layout == Layout::nhwc;
  CG_CHECK(x_in.dim() == 4 && weight.dim() == 4, "conv2d: input {} and weight {} must be 4-D", x_in.str(),
           weight.str());
  const int64_t channel_dim = nhwc ? 3 : 1;
  CG_CHECK(x_in.size(channel_dim) == weight.size(1), "conv2d: {} input {} has {} channels, weight {} expects {}",
           nhwc ? "NHWC" : "NCHW", x_in.str(), x_in.size(channel_dim), weight.str(), weight.size(1));
  // Under autocast the half copies are what the kernels see (and what backward differentiates);
  // the weight is cast by the implementation, which returns its gradient in the weight's dtype.
  const DType dt = autocast::compute_dtype(x_in);
  const Tensor x = cast(x_in, dt);
  const Tensor bias = bias_in.defined() ? cast(bias_in, dt) : Tensor();
  detail::check_same("conv2d", x, bias);
  CG_CHECK(weight.device() == x.device(), "conv2d: input {} and weight {} are on different devices", x.str(),
           weight.str());
  const impl::ConvProblem p = problem_of(x, weight, options, dt);
  const kernels::Conv2dShape& s = p.shape;
  CG_CHECK(s.stride >= 1 && s.pad >= 0 && s.out_h() >= 1 && s.out_w() >= 1,
           "conv2d: input {} too small for kernel {}x{} stride {} padding {}", x.str(), s.kh, s.kw, s.stride, s.pad);
  if (bias.defined()) CG_CHECK(bias.numel() == s.c_out, "conv2d: bias {} for {} outputs", bias.str(), s.c_out);
  auto implementation = impl::pick_conv(p);
  impl::ConvForwardArgs a{.x = x, .w = weight, .b = bias};
  implementation->forward(p, a);
  Tensor& y = a.y;
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<Conv2dBackward>(std::move(implementation), p, std::move(a.saved), bias.defined());
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
