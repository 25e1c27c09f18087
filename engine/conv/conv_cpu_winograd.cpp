// The CPU Winograd convolution (kernels/cpu_conv/winograd.h): NCHW float32 3x3 stride-1 layers with
// at least 32 channels in and out, or channels in groups of 16 on planes up to 32x32. Selected by
// kernels.cpu_conv=winograd only: auto leaves it out, its error being 4-8x PyTorch float32's
// (conv_choice.cpp).
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "kernels/cpu_conv/winograd.h"

namespace cg::impl {
namespace {

// Below this many channels (in or out) the 36 per-element GEMMs are too thin to pay for the
// transforms, unless the channels come in groups of 16 on small planes, where the 16-plane
// transforms make Winograd the fastest kernel in all three phases (the measurements behind both
// rules: bench/NOTES.md, "Figures once kept in code comments").
constexpr int64_t kMinChannels = 32;

}  // namespace

bool winograd_takes(const kernels::Conv2dShape& s) {
  if (!kernels::cpu::winograd_supports(s)) return false;
  return (s.c_in >= kMinChannels && s.c_out >= kMinChannels) || kernels::cpu::winograd_vectorizes_channels(s);
}

namespace {

class WinogradConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution";
    if (p.dtype != DType::f32) return "runs float32 only";
    if (!kernels::cpu::winograd_supports(p.shape)) return "runs 3x3 stride-1 layers only";
    if (!winograd_takes(p.shape))
      return "runs layers of at least 32 channels in and out, or of channels in groups of 16 up to 32x32, only";
    return nullptr;
  }

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    a.y = new_conv_output(p, a.x, a.w);
    kernels::cpu::winograd_conv2d_forward(p.shape, a.x.data<float>(), a.w.data<float>(), data_or_null<float>(a.b),
                                          a.y.data<float>());
    a.saved = conv_saved(a.x, a.w);
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
    new_conv_grads(p, a);
    if (a.need_dx)
      kernels::cpu::winograd_conv2d_backward_data(p.shape, dy.data<float>(), w.data<float>(), a.dx.data<float>());
    if (a.need_w)
      kernels::cpu::winograd_conv2d_backward_filter(p.shape, x.data<float>(), dy.data<float>(), a.dw.data<float>(),
                                                    data_or_null<float>(a.db));
  }
};

}  // namespace

ConvEntry conv_winograd_entry() {
  return {"cpu winograd", DeviceType::cpu, ImplKey::winograd, std::make_shared<WinogradConv>()};
}

}  // namespace cg::impl
