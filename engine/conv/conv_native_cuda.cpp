// The hand-written GPU convolution (kernels/cuda/conv_native.h, an implicit GEMM): NCHW only.
#include "engine/conv/conv.h"
#include "engine/dispatch.h"
#include "kernels/cuda/conv_native.h"

namespace cg::impl {
namespace {

namespace cu = kernels::cuda;

class NativeConv : public ConvImpl {
 public:
  const char* refusal(const ConvProblem& p) const override {
    if (p.layout != ops::Layout::nchw)
      return "runs NCHW only (channels-last goes through \"native channels-last\")";
    if (!ops::detail::gpu_dtype(p.dtype) || !cu::conv2d_native_supports(p.shape, p.dtype))
      return "does not support it";
    return nullptr;
  }

  Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w_param, const Tensor& b,
                 ConvSaved& saved) const override {
    const kernels::Conv2dShape& s = p.shape;
    const Tensor w = w_param.dtype() == p.dtype ? w_param : w_param.to(p.dtype);
    Tensor y = Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, p.dtype, x.device());
    cu::conv2d_native_forward(s, p.dtype, x.raw_data(), w.raw_data(), b.defined() ? b.raw_data() : nullptr,
                              y.raw_data(), ops::detail::stream_of(x));
    saved = {x.detach(), w.detach(), w_param.dtype()};
    return y;
  }

  ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx, bool need_w,
                     bool has_bias) const override {
    const auto stream = ops::detail::stream_of(dy);
    std::vector<Tensor> scratch;  // the filter gradient's partial sums, from the caching allocator
    const auto ws = ops::detail::workspace(dy.device(), scratch);
    ConvGrads g;
    if (need_dx) {
      g.dx = Tensor::empty(saved.x.shape(), p.dtype, dy.device());
      cu::conv2d_native_backward_data(p.shape, p.dtype, dy.raw_data(), saved.w.raw_data(), g.dx.raw_data(), stream);
    }
    if (need_w) {
      g.dw = Tensor::empty(saved.w.shape(), p.dtype, dy.device());
      if (has_bias) g.db = Tensor::empty({p.shape.c_out}, p.dtype, dy.device());
      cu::conv2d_native_backward_filter(p.shape, p.dtype, saved.x.raw_data(), dy.raw_data(), g.dw.raw_data(),
                                        g.db.defined() ? g.db.raw_data() : nullptr, ws, stream);
      if (saved.weight_dtype != p.dtype) g.dw = g.dw.to(saved.weight_dtype);  // the forward's cast, undone
    }
    return g;
  }
};

}  // namespace

ConvEntry conv_native_entry() { return {"native", DeviceType::cuda, ImplKey::native, std::make_shared<NativeConv>()}; }

}  // namespace cg::impl
