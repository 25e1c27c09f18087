// The CPU direct convolution (kernels/cpu_conv/conv_direct.h): NCHW float32 3x3 padding-1 and 1x1
// layers of stride 1 or 2. kernels.cpu_conv=direct runs it on every layer it supports; auto on
// the 3x3 layers whose forward it is fastest for (cpu_conv_auto, conv_choice.cpp), each backward
// phase then from the kernel auto names for it (cpu_auto_backward: direct, im2col or Winograd
// F(2x2), kernels/cpu_conv/auto_rule.h).
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "kernels/cpu_conv/conv_direct.h"

namespace cg::impl {
namespace {

class DirectConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution";
    if (p.dtype != DType::f32) return "runs float32 only";
    if (!kernels::cpu::direct_conv_supports(p.shape))
      return "runs 3x3 padding-1 and 1x1 padding-0 layers of stride 1 or 2 only";
    return nullptr;
  }

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    a.y = new_conv_output(p, a.x, a.w);
    kernels::cpu::direct_conv2d_forward(p.shape, a.x.data<float>(), a.w.data<float>(), data_or_null<float>(a.b),
                                        a.y.data<float>());
    a.saved = conv_saved(a.x, a.w);
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    if (p.policy.cpu_conv == ops::CpuConvAlgorithm::automatic) return cpu_auto_backward(p, a);
    const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
    const kernels::Conv2dShape& s = p.shape;
    new_conv_grads(p, a);
    if (a.need_dx) kernels::cpu::direct_conv2d_backward_data(s, dy.data<float>(), w.data<float>(), a.dx.data<float>());
    if (a.need_w)
      kernels::cpu::direct_conv2d_backward_filter(s, x.data<float>(), dy.data<float>(), a.dw.data<float>(),
                                                  data_or_null<float>(a.db));
  }
};

}  // namespace

ConvEntry conv_direct_entry() { return {"cpu direct", DeviceType::cpu, ImplKey::direct, std::make_shared<DirectConv>()}; }

}  // namespace cg::impl
