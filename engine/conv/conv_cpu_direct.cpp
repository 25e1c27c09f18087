// The CPU direct convolution (kernels/cpu_conv/conv_direct.h): NCHW float32 3x3 padding-1 and 1x1
// layers of stride 1 or 2. kernels.cpu_conv=direct runs it on every layer it supports; auto on
// every 3x3 layer (cpu_conv_auto, conv_choice.cpp), handing a backward phase to im2col where
// im2col measured faster for the shape (direct_phases_auto).
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
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

  Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                 ConvSaved& saved) const override {
    const kernels::Conv2dShape& s = p.shape;
    Tensor y = new_conv_output(p, x, w);
    kernels::cpu::direct_conv2d_forward(s, x.data<float>(), w.data<float>(), b.defined() ? b.data<float>() : nullptr,
                                        y.data<float>());
    saved = conv_saved(x, w);
    return y;
  }

  ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx, bool need_w,
                     bool has_bias) const override {
    const Tensor &x = saved.x, &w = saved.w;
    const kernels::Conv2dShape& s = p.shape;
    const DirectPhases own =
        p.policy.cpu_conv == ops::CpuConvAlgorithm::automatic ? direct_phases_auto(s) : DirectPhases{};
    ConvGrads g = new_conv_grads(p, saved, need_dx, need_w, has_bias);
    float* db = g.db.defined() ? g.db.data<float>() : nullptr;
    if (need_dx && own.data)
      kernels::cpu::direct_conv2d_backward_data(s, dy.data<float>(), w.data<float>(), g.dx.data<float>());
    else if (need_dx)
      kernels::cpu::im2col_conv2d_backward_data<float>(s, dy.data<float>(), w.data<float>(), g.dx.data<float>());
    if (need_w && own.filter)
      kernels::cpu::direct_conv2d_backward_filter(s, x.data<float>(), dy.data<float>(), g.dw.data<float>(), db);
    else if (need_w)
      kernels::cpu::im2col_conv2d_backward_filter<float>(s, x.data<float>(), dy.data<float>(), g.dw.data<float>(), db);
    return g;
  }
};

}  // namespace

ConvEntry conv_direct_entry() { return {"cpu direct", DeviceType::cpu, ImplKey::direct, std::make_shared<DirectConv>()}; }

}  // namespace cg::impl
