// cuDNN's convolution (kernels/cuda/cudnn.h), NCHW or channels-last. Channels-last reads NHWC
// activations and a KRSC copy of the weight made in the forward (cast and transposed in one
// pass); the KRSC weight gradient is transposed back to the parameter's KCRS and dtype. Scratch
// memory comes from the caching allocator (ops::detail::workspace).
#include "engine/conv/conv.h"
#include "engine/dispatch.h"
#include "engine/ops/layout.h"
#include "kernels/cuda/cudnn.h"

namespace cg::impl {
namespace {

namespace cu = kernels::cuda;

// kernels.cudnn_algo_search and kernels.cudnn_deterministic for the kernels (which cache one
// algorithm per shape and rule).
cu::AlgoRule search_of(const ConvProblem& p) {
  return {p.policy.cudnn_algo_search == ops::ConvAlgoSearch::timed ? cu::AlgoSearch::timed : cu::AlgoSearch::heuristic,
          p.policy.cudnn_deterministic};
}

class CudnnConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (!ops::detail::gpu_dtype(p.dtype) || !cu::conv2d_cudnn_supports(p.shape, p.dtype)) return "does not support it";
    return nullptr;
  }

  Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w_param, const Tensor& b,
                 ConvSaved& saved) const override {
    const kernels::Conv2dShape& s = p.shape;
    const bool nhwc = p.layout == ops::Layout::nhwc;
    const Tensor w = nhwc ? ops::detail::to_channels_last(w_param, p.dtype)
                          : (w_param.dtype() == p.dtype ? w_param : w_param.to(p.dtype));
    Tensor y = nhwc ? Tensor::empty({s.n, s.out_h(), s.out_w(), s.c_out}, p.dtype, x.device())
                    : Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, p.dtype, x.device());
    std::vector<Tensor> scratch;
    cu::conv2d_cudnn_forward(s, p.dtype, x.raw_data(), w.raw_data(), b.defined() ? b.raw_data() : nullptr,
                             y.raw_data(), ops::detail::workspace(x.device(), scratch), ops::detail::stream_of(x),
                             p.layout, search_of(p));
    saved = {x.detach(), w.detach(), w_param.dtype()};
    return y;
  }

  ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx, bool need_w,
                     bool has_bias) const override {
    const auto stream = ops::detail::stream_of(dy);
    std::vector<Tensor> scratch;
    const auto ws = ops::detail::workspace(dy.device(), scratch);
    ConvGrads g;
    if (need_dx) {
      g.dx = Tensor::empty(saved.x.shape(), p.dtype, dy.device());
      cu::conv2d_cudnn_backward_data(p.shape, p.dtype, dy.raw_data(), saved.w.raw_data(), g.dx.raw_data(), ws, stream,
                                     p.layout, search_of(p));
    }
    if (need_w) {
      Tensor dw = Tensor::empty(saved.w.shape(), p.dtype, dy.device());
      if (has_bias) g.db = Tensor::empty({p.shape.c_out}, p.dtype, dy.device());
      cu::conv2d_cudnn_backward_filter(p.shape, p.dtype, saved.x.raw_data(), dy.raw_data(), dw.raw_data(),
                                       g.db.defined() ? g.db.raw_data() : nullptr, ws, stream, p.layout, search_of(p));
      if (p.layout == ops::Layout::nhwc) g.dw = ops::detail::to_channels_first(dw, saved.weight_dtype);
      else g.dw = saved.weight_dtype == p.dtype ? dw : dw.to(saved.weight_dtype);
    }
    return g;
  }
};

}  // namespace

ConvEntry conv_cudnn_entry() { return {"cudnn", DeviceType::cuda, ImplKey::cudnn, std::make_shared<CudnnConv>()}; }

}  // namespace cg::impl
