// conv2d and its backward: data and filter gradients from the CPU kernels.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/conv2d.h"

namespace cg::ops {
namespace {

using kernels::cpu::Conv2dShape;

class Conv2dBackward : public autograd::Node {
 public:
  Conv2dBackward(Tensor x, Tensor w, bool has_bias, Conv2dShape s)
      : x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias), s_(s) {}
  std::string name() const override { return "Conv2dBackward"; }
  void release_saved() override { x_ = {}; w_ = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> grads(3);
    detail::dispatch_floating("conv2d backward", dy, [&]<typename T>() {
      if (needs_grad(0)) {
        grads[0] = Tensor::empty(x_.shape(), x_.dtype());
        kernels::cpu::conv2d_backward_data<T>(s_, dy.data<T>(), w_.data<T>(), grads[0].data<T>());
      }
      if (needs_grad(1) || needs_grad(2)) {
        grads[1] = Tensor::empty(w_.shape(), w_.dtype());
        if (has_bias_) grads[2] = Tensor::empty({s_.c_out}, w_.dtype());
        kernels::cpu::conv2d_backward_filter<T>(s_, x_.data<T>(), dy.data<T>(),
                                                grads[1].data<T>(),
                                                has_bias_ ? grads[2].data<T>() : nullptr);
      }
    });
    return grads;
  }

 private:
  Tensor x_, w_;
  bool has_bias_;
  Conv2dShape s_;
};

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dOptions options) {
  CG_CHECK(x.dim() == 4 && weight.dim() == 4, "conv2d: input {} and weight {} must be 4-D",
           x.str(), weight.str());
  CG_CHECK(x.size(1) == weight.size(1), "conv2d: input {} has {} channels, weight {} expects {}",
           x.str(), x.size(1), weight.str(), weight.size(1));
  detail::check_same("conv2d", x, weight);
  detail::check_same("conv2d", x, bias);
  Conv2dShape s{x.size(0), x.size(1), x.size(2), x.size(3), weight.size(0), weight.size(2),
                weight.size(3), options.stride, options.padding};
  CG_CHECK(s.stride >= 1 && s.pad >= 0 && s.out_h() >= 1 && s.out_w() >= 1,
           "conv2d: input {} too small for kernel {}x{} stride {} padding {}", x.str(), s.kh, s.kw,
           s.stride, s.pad);
  if (bias.defined()) CG_CHECK(bias.numel() == s.c_out, "conv2d: bias {} for {} outputs", bias.str(), s.c_out);
  Tensor y = Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, x.dtype());
  detail::dispatch_floating("conv2d", x, [&]<typename T>() {
    kernels::cpu::conv2d_forward<T>(s, x.data<T>(), weight.data<T>(),
                                    bias.defined() ? bias.data<T>() : nullptr, y.data<T>());
  });
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<Conv2dBackward>(x.detach(), weight.detach(), bias.defined(), s);
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
