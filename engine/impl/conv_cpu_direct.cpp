// The CPU direct convolution (kernels/cpu/conv_direct.h): NCHW float32 3x3 padding-1 and 1x1
// layers of stride 1 or 2. Under kernels.cpu_conv=auto it takes the shapes where it measured
// fastest (the narrow network's stem and its first stride-2 layer; bench/NOTES.md), ahead of
// Winograd and the im2col reference; kernels.cpu_conv=direct runs it on every layer it supports;
// im2col and winograd turn it off.
#include "engine/impl/conv.h"
#include "engine/impl/conv_cpu_tensors.h"
#include "kernels/cpu/conv_direct.h"

namespace cg::impl {
namespace {

// auto's rule, from per-layer A/B timings (cpu_conv_bench; the figures: bench/NOTES.md, "Figures
// once kept in code comments"). 3x3 stride 1: the direct kernel beats im2col on every layer below
// 32 channels in or out, and Winograd beats it where winograd_takes. 3x3 stride 2: direct below 32
// input channels. 1x1: im2col, since the direct 1x1 reads its input planes once per tap with
// nothing to reuse.
bool direct_is_fastest(const kernels::Conv2dShape& s) {
  if (s.kh != 3) return false;
  if (s.stride == 2) return s.c_in < 32;
  return (s.c_in < 32 || s.c_out < 32) && !winograd_takes(s);
}

class CpuDirectConv : public ConvImpl {
 public:
  std::string why_unsupported(const ConvProblem& p) const override {
    const ops::CpuConv choice = ops::cpu_conv();
    if (choice == ops::CpuConv::im2col || choice == ops::CpuConv::winograd)
      return "is off (kernels.cpu_conv is not auto or direct)";
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution";
    if (p.dtype != DType::f32) return "runs float32 only";
    if (!kernels::cpu::direct_conv_supports(p.shape))
      return "runs 3x3 padding-1 and 1x1 padding-0 layers of stride 1 or 2 only";
    if (choice == ops::CpuConv::automatic && !direct_is_fastest(p.shape))
      return "leaves this shape to Winograd or im2col under kernels.cpu_conv=auto (measured faster)";
    return "";
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
    ConvGrads g = new_conv_grads(p, saved, need_dx, need_w, has_bias);
    if (need_dx)
      kernels::cpu::direct_conv2d_backward_data(p.shape, dy.data<float>(), w.data<float>(), g.dx.data<float>());
    if (need_w)
      kernels::cpu::direct_conv2d_backward_filter(p.shape, x.data<float>(), dy.data<float>(), g.dw.data<float>(),
                                                  g.db.defined() ? g.db.data<float>() : nullptr);
    return g;
  }
};

}  // namespace

void register_conv_cpu_direct(ConvRegistry& r) {
  r.add_builtin({"cpu direct", DeviceType::cpu, Choice::automatic, 2, std::make_shared<CpuDirectConv>()});
}

}  // namespace cg::impl
