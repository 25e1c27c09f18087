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

  void forward(const ConvProblem& p, ConvForwardArgs& a) const override {
    const kernels::Conv2dShape& s = p.shape;
    const Tensor w = a.w.dtype() == p.dtype ? a.w : a.w.to(p.dtype);
    a.y = Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, p.dtype, a.x.device());
    cu::conv2d_native_forward(s, p.dtype, a.x.raw_data(), w.raw_data(), ops::detail::raw_or_null(a.b), a.y.raw_data(),
                              ops::detail::stream_of(a.x));
    a.saved = {a.x.detach(), w.detach(), a.w.dtype()};
  }

  void backward(const ConvProblem& p, ConvBackwardArgs& a) const override {
    const ConvSaved& saved = a.saved;
    const auto stream = ops::detail::stream_of(a.dy);
    std::vector<Tensor> scratch;  // the filter gradient's partial sums, from the caching allocator
    const auto ws = ops::detail::workspace(a.dy.device(), scratch);
    if (a.need_dx) {
      a.dx = Tensor::empty(saved.x.shape(), p.dtype, a.dy.device());
      cu::conv2d_native_backward_data(p.shape, p.dtype, a.dy.raw_data(), saved.w.raw_data(), a.dx.raw_data(), stream);
    }
    if (a.need_w) {
      a.dw = Tensor::empty(saved.w.shape(), p.dtype, a.dy.device());
      if (a.has_bias) a.db = Tensor::empty({p.shape.c_out}, p.dtype, a.dy.device());
      cu::conv2d_native_backward_filter(p.shape, p.dtype, saved.x.raw_data(), a.dy.raw_data(), a.dw.raw_data(),
                                        ops::detail::raw_or_null_m(a.db), ws, stream);
      if (saved.weight_dtype != p.dtype) a.dw = a.dw.to(saved.weight_dtype);  // the forward's cast, undone
    }
  }
};

}  // namespace

ConvEntry conv_native_entry() { return {"native", DeviceType::cuda, ImplKey::native, std::make_shared<NativeConv>()}; }

}  // namespace cg::impl
