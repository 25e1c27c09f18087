// The CPU Winograd convolutions (kernels/cpu_conv/winograd.h). F(4x4, 3x3): NCHW float32 3x3
// stride-1 layers with at least 32 channels in and out, or channels in groups of 16 on planes up to
// 32x32; selected by kernels.cpu_conv=winograd only: auto leaves it out, its error being 4-8x
// PyTorch float32's (conv_choice.cpp). F(2x2, 3x3): every NCHW float32 3x3 stride-1 layer, by
// kernels.cpu_conv=winograd2, and by auto where it is exact enough and fastest.
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

// Winograd with output tiles of `tile` x `tile`: F(4x4, 3x3) by kernels.cpu_conv=winograd only,
// F(2x2, 3x3) by kernels.cpu_conv=winograd2 on every 3x3 stride-1 layer, and by auto where its
// forward is exact enough and the fastest (kernels/cpu_conv/auto_rule.h; its backward phases then
// as cpu_auto_backward says).
class WinogradConv : public ConvImpl {
 public:
  explicit WinogradConv(int tile) : tile_(tile) {}

  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw) return "has no channels-last convolution";
    if (p.dtype != DType::f32) return "runs float32 only";
    if (!kernels::cpu::winograd_supports(p.shape)) return "runs 3x3 stride-1 layers only";
    if (tile_ == 4 && !winograd_takes(p.shape))
      return "runs layers of at least 32 channels in and out, or of channels in groups of 16 up to 32x32, only";
    return nullptr;
  }

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    a.y = new_conv_output(p, a.x, a.w);
    (tile_ == 4 ? kernels::cpu::winograd_conv2d_forward : kernels::cpu::winograd2_conv2d_forward)(
        p.shape, a.x.data<float>(), a.w.data<float>(), data_or_null<float>(a.b), a.y.data<float>());
    a.saved = conv_saved(a.x, a.w);
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    if (p.policy.cpu_conv == ops::CpuConvAlgorithm::automatic) return cpu_auto_backward(p, a);
    const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
    new_conv_grads(p, a);
    const bool f4 = tile_ == 4;
    if (a.need_dx)
      (f4 ? kernels::cpu::winograd_conv2d_backward_data : kernels::cpu::winograd2_conv2d_backward_data)(
          p.shape, dy.data<float>(), w.data<float>(), a.dx.data<float>());
    if (a.need_w)
      (f4 ? kernels::cpu::winograd_conv2d_backward_filter : kernels::cpu::winograd2_conv2d_backward_filter)(
          p.shape, x.data<float>(), dy.data<float>(), a.dw.data<float>(), data_or_null<float>(a.db));
  }

 private:
  int tile_;
};

}  // namespace

ConvEntry conv_winograd_entry() {
  return {"cpu winograd", DeviceType::cpu, ImplKey::winograd, std::make_shared<WinogradConv>(4)};
}

ConvEntry conv_winograd2_entry() {
  return {"cpu winograd2", DeviceType::cpu, ImplKey::winograd2, std::make_shared<WinogradConv>(2)};
}

}  // namespace cg::impl
