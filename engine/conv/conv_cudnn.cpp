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

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    const kernels::Conv2dShape& s = p.shape;
    const bool nhwc = p.layout == ops::Layout::nhwc;
    const Tensor w = nhwc ? ops::detail::to_channels_last(a.w, p.dtype) : (a.w.dtype() == p.dtype ? a.w : a.w.to(p.dtype));
    a.y = nhwc ? Tensor::empty({s.n, s.out_h(), s.out_w(), s.c_out}, p.dtype, a.x.device())
               : Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, p.dtype, a.x.device());
    std::vector<Tensor> scratch;
    cu::conv2d_cudnn_forward(s, p.dtype, a.x.raw_data(), w.raw_data(), ops::detail::raw_or_null(a.b), a.y.raw_data(),
                             ops::detail::workspace(a.x.device(), scratch), ops::detail::stream_of(a.x), p.layout,
                             search_of(p));
    a.saved = {a.x.detach(), w.detach(), a.w.dtype()};
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    const ConvSaved& saved = a.saved;
    const auto stream = ops::detail::stream_of(a.dy);
    std::vector<Tensor> scratch;
    const auto ws = ops::detail::workspace(a.dy.device(), scratch);
    if (a.need_dx) {
      a.dx = Tensor::empty(saved.x.shape(), p.dtype, a.dy.device());
      cu::conv2d_cudnn_backward_data(p.shape, p.dtype, a.dy.raw_data(), saved.w.raw_data(), a.dx.raw_data(), ws,
                                     stream, p.layout, search_of(p));
    }
    if (a.need_w) {
      Tensor dw = Tensor::empty(saved.w.shape(), p.dtype, a.dy.device());
      if (a.has_bias) a.db = Tensor::empty({p.shape.c_out}, p.dtype, a.dy.device());
      cu::conv2d_cudnn_backward_filter(p.shape, p.dtype, saved.x.raw_data(), a.dy.raw_data(), dw.raw_data(),
                                       ops::detail::raw_or_null_m(a.db), ws, stream, p.layout, search_of(p));
      if (p.layout == ops::Layout::nhwc) a.dw = ops::detail::to_channels_first(dw, saved.weight_dtype);
      else a.dw = saved.weight_dtype == p.dtype ? dw : dw.to(saved.weight_dtype);
    }
  }
};

}  // namespace

ConvEntry conv_cudnn_entry() { return {"cudnn", DeviceType::cuda, ImplKey::cudnn, std::make_shared<CudnnConv>()}; }

}  // namespace cg::impl
