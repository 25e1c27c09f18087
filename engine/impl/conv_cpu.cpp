// The CPU reference convolution (kernels/cpu/conv2d.h): NCHW, float32 and float64.
#include "engine/impl/conv.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/conv2d.h"

namespace cg::impl {
namespace {

class CpuConv : public ConvImpl {
 public:
  std::string why_unsupported(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution on the CPU";
    if (p.dtype != DType::f32 && p.dtype != DType::f64) return "runs float32 and float64 only";
    return "";
  }

  Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                 ConvSaved& saved) const override {
    const kernels::Conv2dShape& s = p.shape;
    ops::detail::check_same("conv2d", x, w);
    Tensor y = Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, x.dtype(), x.device());
    ops::detail::dispatch_floating("conv2d", x, [&]<typename T>() {
      kernels::cpu::conv2d_forward<T>(s, x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr, y.data<T>());
    });
    saved = {x.detach(), w.detach(), w.dtype()};
    return y;
  }

  ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx, bool need_w,
                     bool has_bias) const override {
    const Tensor &x = saved.x, &w = saved.w;
    ConvGrads g;
    if (need_dx) g.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (need_w) {
      g.dw = Tensor::empty(w.shape(), w.dtype(), w.device());
      if (has_bias) g.db = Tensor::empty({p.shape.c_out}, w.dtype(), w.device());
    }
    ops::detail::dispatch_floating("conv2d backward", dy, [&]<typename T>() {
      if (need_dx) kernels::cpu::conv2d_backward_data<T>(p.shape, dy.data<T>(), w.data<T>(), g.dx.data<T>());
      if (need_w)
        kernels::cpu::conv2d_backward_filter<T>(p.shape, x.data<T>(), dy.data<T>(), g.dw.data<T>(),
                                                g.db.defined() ? g.db.data<T>() : nullptr);
    });
    return g;
  }
};

}  // namespace

void register_conv_cpu(ConvRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuConv>()});
}

}  // namespace cg::impl
