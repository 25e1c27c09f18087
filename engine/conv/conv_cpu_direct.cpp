// The CPU direct convolution (kernels/cpu_conv/conv_direct.h): NCHW float32 3x3 padding-1 and 1x1
// layers of stride 1 or 2. kernels.cpu_conv=direct runs it on every layer it supports; auto on
// every 3x3 layer (cpu_conv_auto, conv_choice.cpp), handing a backward phase to im2col where
// im2col measured faster for the shape (direct_phases_auto, kernels/cpu_conv/auto_rule.h).
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "kernels/cpu_conv/auto_rule.h"
#include "kernels/cpu_conv/conv_direct.h"
#include "kernels/cpu_conv/im2col.h"

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
    const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
    const kernels::Conv2dShape& s = p.shape;
    const kernels::cpu::DirectPhases own = p.policy.cpu_conv == ops::CpuConvAlgorithm::automatic
                                               ? kernels::cpu::direct_phases_auto(s)
                                               : kernels::cpu::DirectPhases{};
    new_conv_grads(p, a);
    float* db = data_or_null<float>(a.db);
    if (a.need_dx && own.data)
      kernels::cpu::direct_conv2d_backward_data(s, dy.data<float>(), w.data<float>(), a.dx.data<float>());
    else if (a.need_dx)
      kernels::cpu::im2col_conv2d_backward_data<float>(s, dy.data<float>(), w.data<float>(), a.dx.data<float>());
    if (a.need_w && own.filter)
      kernels::cpu::direct_conv2d_backward_filter(s, x.data<float>(), dy.data<float>(), a.dw.data<float>(), db);
    else if (a.need_w)
      kernels::cpu::im2col_conv2d_backward_filter<float>(s, x.data<float>(), dy.data<float>(), a.dw.data<float>(), db);
  }
};

}  // namespace

ConvEntry conv_direct_entry() { return {"cpu direct", DeviceType::cpu, ImplKey::direct, std::make_shared<DirectConv>()}; }

}  // namespace cg::impl
