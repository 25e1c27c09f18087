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

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    a.y = new_conv_output(p, a.x, a.w);
    ops::detail::dispatch_floating("conv2d reference", a.x, [&]<typename T>() {
      kernels::cpu::conv2d_forward<T>(p.shape, a.x.data<T>(), a.w.data<T>(), data_or_null<T>(a.b), a.y.data<T>());
    });
    a.saved = conv_saved(a.x, a.w);
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
    new_conv_grads(p, a);
    ops::detail::dispatch_floating("conv2d reference backward", dy, [&]<typename T>() {
      if (a.need_dx) kernels::cpu::conv2d_backward_data<T>(p.shape, dy.data<T>(), w.data<T>(), a.dx.data<T>());
      if (a.need_w)
        kernels::cpu::conv2d_backward_filter<T>(p.shape, x.data<T>(), dy.data<T>(), a.dw.data<T>(),
                                                data_or_null<T>(a.db));
    });
  }
};

}  // namespace

ConvEntry conv_reference_entry() {
  return {"cpu reference", DeviceType::cpu, ImplKey::reference, std::make_shared<ReferenceConv>()};
}

}  // namespace cg::impl
