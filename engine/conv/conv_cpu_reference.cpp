// The plain CPU reference convolution (kernels/cpu/conv2d.h) as a registry entry: NCHW, float32
// and float64, every shape. No kernels.cpu_conv value selects it (it is far too slow to train
// with); it is registered so that the conformance suites run it like every other implementation,
// against the float64 results of the same kernels.
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "engine/dispatch.h"
#include "kernels/cpu/conv2d.h"

namespace cg::impl {
namespace {

class ReferenceConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution";
    if (p.dtype != DType::f32 && p.dtype != DType::f64) return "runs float32 and float64 only";
    return nullptr;
  }

  Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                 ConvSaved& saved) const override {
    Tensor y = new_conv_output(p, x, w);
    ops::detail::dispatch_floating("conv2d reference", x, [&]<typename T>() {
      const T* bias = b.defined() ? b.data<T>() : nullptr;
      kernels::cpu::conv2d_forward<T>(p.shape, x.data<T>(), w.data<T>(), bias, y.data<T>());
    });
    saved = conv_saved(x, w);
    return y;
  }

  ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx, bool need_w,
                     bool has_bias) const override {
    ConvGrads g = new_conv_grads(p, saved, need_dx, need_w, has_bias);
    ops::detail::dispatch_floating("conv2d reference backward", dy, [&]<typename T>() {
      const T* grad = dy.data<T>();
      if (need_dx) kernels::cpu::conv2d_backward_data<T>(p.shape, grad, saved.w.data<T>(), g.dx.data<T>());
      T* db = g.db.defined() ? g.db.data<T>() : nullptr;
      if (need_w) kernels::cpu::conv2d_backward_filter<T>(p.shape, saved.x.data<T>(), grad, g.dw.data<T>(), db);
    });
    return g;
  }
};

}  // namespace

ConvEntry conv_reference_entry() {
  return {"cpu reference", DeviceType::cpu, ImplKey::reference, std::make_shared<ReferenceConv>()};
}

}  // namespace cg::impl
