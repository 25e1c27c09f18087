// Channels-last convolution for the implementations that have none of their own: the NCHW
// convolution that the registry picks for the same problem under the same policy, between layout changes of the
// activations and their gradients. The weight stays [c_out, c_in, kh, kw] in both layouts, so
// results are bit-identical to the NCHW convolution.
// On the CPU this is how every NHWC convolution runs. On the GPU it is kernels.conv=native's
// channels-last: cuDNN convolves NHWC directly and is preferred under auto, so this one is taken
// where cuDNN is absent (the emulated GPU) or not chosen; its two transposes per pass are the price.
#include "engine/conv/conv.h"
#include "engine/dispatch.h"
#include "engine/ops/layout.h"
#include "kernels/cuda/conv_native.h"

namespace cg::impl {
namespace {

using ops::detail::to_channels_first;
using ops::detail::to_channels_last;

// On the GPU the inner convolution is the native kernel whatever kernels.conv says: this entry is
// what "native" means for channels-last, so under auto it must not time cuDNN's NCHW path inside.
ConvProblem as_nchw(const ConvProblem& p) {
  ConvProblem q = p;
  q.layout = ops::Layout::nchw;
  if (!p.device.is_cpu()) q.policy.conv = ops::GpuImpl::native;
  return q;
}

class ChannelsLastConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nhwc) return "runs channels-last only (NCHW has its own implementations)";
    if (p.device.is_cpu())
      return p.dtype == DType::f32 || p.dtype == DType::f64 ? nullptr : "runs float32 and float64 only";
    if constexpr (ops::detail::kCudaBuild) {
      if (ops::detail::gpu_dtype(p.dtype) && kernels::cuda::conv2d_native_supports(p.shape, p.dtype)) return nullptr;
    }
    return "does not support it";
  }

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    const ConvProblem q = as_nchw(p);
    std::shared_ptr<const ConvImpl> inner = pick_conv(q);
    ConvForwardArgs nchw{.x = to_channels_first(a.x, a.x.dtype()), .w = a.w, .b = a.b};
    inner->forward(q, nchw);
    a.y = to_channels_last(nchw.y, nchw.y.dtype());
    a.saved = std::move(nchw.saved);
    a.saved.inner = std::move(inner);  // the backward runs the same NCHW implementation
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    CG_CHECK(a.saved.inner, "{}: channels-last backward without its forward", p.layer);
    ConvBackwardArgs nchw{.dy = to_channels_first(a.dy, a.dy.dtype()), .saved = a.saved, .need_dx = a.need_dx,
                          .need_w = a.need_w, .has_bias = a.has_bias};
    a.saved.inner->backward(as_nchw(p), nchw);
    a.dx = nchw.dx.defined() ? to_channels_last(nchw.dx, nchw.dx.dtype()) : Tensor();
    a.dw = std::move(nchw.dw);
    a.db = std::move(nchw.db);
  }
};

}  // namespace

ConvEntry conv_cpu_channels_last_entry() {
  return {"cpu channels-last", DeviceType::cpu, ImplKey::channels_last, std::make_shared<ChannelsLastConv>()};
}
ConvEntry conv_native_channels_last_entry() {
  return {"native channels-last", DeviceType::cuda, ImplKey::native, std::make_shared<ChannelsLastConv>()};
}

}  // namespace cg::impl
