// The CPU im2col + GEMM convolution (kernels/cpu_conv/im2col.h): NCHW, float32 and float64;
// kernels.cpu_conv=im2col, and what the other CPU algorithms leave (float64 included).
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "engine/dispatch.h"
#include "kernels/cpu_conv/im2col.h"

namespace cg::impl {
namespace {

class Im2colConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution on the CPU";
    if (p.dtype != DType::f32 && p.dtype != DType::f64) return "runs float32 and float64 only";
    return nullptr;
  }

  Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                 ConvSaved& saved) const override {
    const kernels::Conv2dShape& s = p.shape;
    Tensor y = new_conv_output(p, x, w);
    ops::detail::dispatch_floating("conv2d", x, [&]<typename T>() {
      kernels::cpu::im2col_conv2d_forward<T>(s, x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr,
                                             y.data<T>());
    });
    saved = conv_saved(x, w);
    return y;
  }

  ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx, bool need_w,
                     bool has_bias) const override {
    const Tensor &x = saved.x, &w = saved.w;
    ConvGrads g = new_conv_grads(p, saved, need_dx, need_w, has_bias);
    ops::detail::dispatch_floating("conv2d backward", dy, [&]<typename T>() {
      if (need_dx) kernels::cpu::im2col_conv2d_backward_data<T>(p.shape, dy.data<T>(), w.data<T>(), g.dx.data<T>());
      if (need_w)
        kernels::cpu::im2col_conv2d_backward_filter<T>(p.shape, x.data<T>(), dy.data<T>(), g.dw.data<T>(),
                                                       g.db.defined() ? g.db.data<T>() : nullptr);
    });
    return g;
  }
};

}  // namespace

ConvEntry conv_im2col_entry() { return {"cpu im2col", DeviceType::cpu, ImplKey::im2col, std::make_shared<Im2colConv>()}; }

}  // namespace cg::impl
