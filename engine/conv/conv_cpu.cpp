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

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    a.y = new_conv_output(p, a.x, a.w);
    ops::detail::dispatch_floating("conv2d", a.x, [&]<typename T>() {
      kernels::cpu::im2col_conv2d_forward<T>(p.shape, a.x.data<T>(), a.w.data<T>(), data_or_null<T>(a.b),
                                             a.y.data<T>());
    });
    a.saved = conv_saved(a.x, a.w);
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
    new_conv_grads(p, a);
    ops::detail::dispatch_floating("conv2d backward", dy, [&]<typename T>() {
      if (a.need_dx)
        kernels::cpu::im2col_conv2d_backward_data<T>(p.shape, dy.data<T>(), w.data<T>(), a.dx.data<T>());
      if (a.need_w)
        kernels::cpu::im2col_conv2d_backward_filter<T>(p.shape, x.data<T>(), dy.data<T>(), a.dw.data<T>(),
                                                       data_or_null<T>(a.db));
    });
  }
};

}  // namespace

ConvEntry conv_im2col_entry() { return {"cpu im2col", DeviceType::cpu, ImplKey::im2col, std::make_shared<Im2colConv>()}; }

}  // namespace cg::impl
