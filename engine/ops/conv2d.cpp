// conv2d and its backward: the CPU reference kernels, or on the GPU cuDNN or the hand-written
// implicit GEMM (ops::gpu_kernels().conv), in the autocast dtype.
// Channels-last (Layout::nhwc): on the GPU cuDNN reads NHWC activations and a KRSC copy of the
// weight made in the forward (cast and transposed in one pass); the KRSC weight gradient is
// transposed back to the parameter's KCRS. On the CPU the NCHW reference runs between two layout
// changes, so both layouts give bit-identical results there.
#include "engine/autocast.h"
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/layout.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/cudnn.h"

namespace cg::ops {
namespace {

using kernels::cpu::Conv2dShape;
namespace cu = kernels::cuda;

// The GPU implementation for one layer, chosen at forward and kept for its backward.
bool use_cudnn(const Conv2dShape& s, DType dtype, const Tensor& x, const Tensor& w) {
  GpuImpl impl = gpu_kernels().conv;
  if (impl == GpuImpl::automatic) impl = cu::conv2d_cudnn_supports(s, dtype) ? GpuImpl::cudnn : GpuImpl::native;
  const bool cudnn = impl == GpuImpl::cudnn;
  const bool ok = cudnn ? cu::conv2d_cudnn_supports(s, dtype) : cu::conv2d_native_supports(s, dtype);
  CG_CHECK(ok, "conv2d layer with input {} and weight {} (stride {}, padding {}): kernels.conv={} does not support it",
           x.str(), w.str(), s.stride, s.pad, cudnn ? "cudnn" : "native");
  return cudnn;
}

// GPU channels-last: cuDNN is the only implementation that takes NHWC.
void check_gpu_nhwc_supported(const Conv2dShape& s, DType dtype, const Tensor& x, const Tensor& w) {
  const GpuImpl impl = gpu_kernels().conv;
  CG_CHECK(impl != GpuImpl::native,
           "conv2d layer with channels-last input {} and weight {} (stride {}, padding {}): kernels.conv=native "
           "has no NHWC convolution; use kernels.conv=cudnn (or auto), or model.channels_last=false",
           x.str(), w.str(), s.stride, s.pad);
  CG_CHECK(cu::conv2d_cudnn_supports(s, dtype),
           "conv2d layer with channels-last input {} and weight {} (stride {}, padding {}): cuDNN does not support it",
           x.str(), w.str(), s.stride, s.pad);
}

class Conv2dBackward : public autograd::Node {
 public:
  Conv2dBackward(Tensor x, Tensor w, bool has_bias, Conv2dShape s, bool cudnn)
      : x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias), s_(s), cudnn_(cudnn) {}
  std::string name() const override { return "Conv2dBackward"; }
  void release_saved() override { x_ = {}; w_ = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> grads(3);
    if (needs_grad(0)) grads[0] = Tensor::empty(x_.shape(), x_.dtype(), x_.device());
    if (needs_grad(1) || needs_grad(2)) {
      grads[1] = Tensor::empty(w_.shape(), w_.dtype(), w_.device());
      if (has_bias_) grads[2] = Tensor::empty({s_.c_out}, w_.dtype(), w_.device());
    }
    void* db = has_bias_ && grads[2].defined() ? grads[2].raw_data() : nullptr;
    if (detail::on_gpu("conv2d backward", dy)) {
      const DType dt = dy.dtype();
      const auto stream = detail::stream_of(dy);
      std::vector<Tensor> scratch;
      const auto ws = detail::workspace(dy.device(), scratch);
      if (grads[0].defined()) {
        if (cudnn_) cu::conv2d_cudnn_backward_data(s_, dt, dy.raw_data(), w_.raw_data(), grads[0].raw_data(), ws, stream);
        else cu::conv2d_native_backward_data(s_, dt, dy.raw_data(), w_.raw_data(), grads[0].raw_data(), stream);
      }
      if (grads[1].defined()) {
        if (cudnn_)
          cu::conv2d_cudnn_backward_filter(s_, dt, x_.raw_data(), dy.raw_data(), grads[1].raw_data(), db, ws, stream);
        else
          cu::conv2d_native_backward_filter(s_, dt, x_.raw_data(), dy.raw_data(), grads[1].raw_data(), db, stream);
      }
      return grads;
    }
    detail::dispatch_floating("conv2d backward", dy, [&]<typename T>() {
      if (grads[0].defined())
        kernels::cpu::conv2d_backward_data<T>(s_, dy.data<T>(), w_.data<T>(), grads[0].data<T>());
      if (grads[1].defined())
        kernels::cpu::conv2d_backward_filter<T>(s_, x_.data<T>(), dy.data<T>(), grads[1].data<T>(),
                                                static_cast<T*>(db));
    });
    return grads;
  }

 private:
  Tensor x_, w_;
  bool has_bias_;
  Conv2dShape s_;
  bool cudnn_;
};

// The GPU NHWC backward: x_ is NHWC and w_krsc_ the KRSC copy, both in the compute dtype; the
// weight gradient leaves as KCRS in the parameter's own dtype (the cast's backward, fused).
class Conv2dNhwcBackward : public autograd::Node {
 public:
  Conv2dNhwcBackward(Tensor x, Tensor w_krsc, DType weight_dtype, bool has_bias, Conv2dShape s)
      : x_(std::move(x)), w_krsc_(std::move(w_krsc)), weight_dtype_(weight_dtype), has_bias_(has_bias), s_(s) {}
  std::string name() const override { return "Conv2dNhwcBackward"; }
  void release_saved() override { x_ = {}; w_krsc_ = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> grads(3);
    const DType dt = dy.dtype();
    const auto stream = detail::stream_of(dy);
    std::vector<Tensor> scratch;
    const auto ws = detail::workspace(dy.device(), scratch);
    if (needs_grad(0)) {
      grads[0] = Tensor::empty(x_.shape(), dt, dy.device());
      cu::conv2d_cudnn_backward_data(s_, dt, dy.raw_data(), w_krsc_.raw_data(), grads[0].raw_data(), ws, stream,
                                     Layout::nhwc);
    }
    if (needs_grad(1) || needs_grad(2)) {
      Tensor dw_krsc = Tensor::empty(w_krsc_.shape(), dt, dy.device());
      if (has_bias_) grads[2] = Tensor::empty({s_.c_out}, dt, dy.device());
      cu::conv2d_cudnn_backward_filter(s_, dt, x_.raw_data(), dy.raw_data(), dw_krsc.raw_data(),
                                       has_bias_ ? grads[2].raw_data() : nullptr, ws, stream, Layout::nhwc);
      grads[1] = detail::to_channels_first(dw_krsc, weight_dtype_);
    }
    return grads;
  }

 private:
  Tensor x_, w_krsc_;
  DType weight_dtype_;
  bool has_bias_;
  Conv2dShape s_;
};

// Channels-last on the GPU: x is NHWC in the compute dtype dt, weight_in KCRS in any floating dtype.
Tensor conv2d_nhwc_gpu(const Tensor& x, const Tensor& weight_in, const Tensor& bias, const Conv2dShape& s, DType dt) {
  detail::on_gpu("conv2d", x);  // checks the dtype
  check_gpu_nhwc_supported(s, dt, x, weight_in);
  CG_CHECK(weight_in.device() == x.device(), "conv2d: input {} and weight {} are on different devices", x.str(),
           weight_in.str());
  const Tensor w_krsc = detail::to_channels_last(weight_in, dt);
  Tensor y = Tensor::empty({s.n, s.out_h(), s.out_w(), s.c_out}, dt, x.device());
  std::vector<Tensor> scratch;
  cu::conv2d_cudnn_forward(s, dt, x.raw_data(), w_krsc.raw_data(), bias.defined() ? bias.raw_data() : nullptr,
                           y.raw_data(), detail::workspace(x.device(), scratch), detail::stream_of(x), Layout::nhwc);
  if (autograd::any_requires_grad({&x, &weight_in, &bias})) {
    auto node = std::make_shared<Conv2dNhwcBackward>(x.detach(), w_krsc, weight_in.dtype(), bias.defined(), s);
    autograd::connect(y, node, {&x, &weight_in, &bias});
  }
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, Conv2dOptions options) {
  const bool nhwc = options.layout == Layout::nhwc;
  CG_CHECK(x_in.dim() == 4 && weight_in.dim() == 4, "conv2d: input {} and weight {} must be 4-D",
           x_in.str(), weight_in.str());
  const int64_t channel_dim = nhwc ? 3 : 1;
  CG_CHECK(x_in.size(channel_dim) == weight_in.size(1),
           "conv2d: {} input {} has {} channels, weight {} expects {}", nhwc ? "NHWC" : "NCHW", x_in.str(),
           x_in.size(channel_dim), weight_in.str(), weight_in.size(1));
  if (nhwc && !x_in.device().is_cuda()) {
    // The CPU reference for channels-last: the NCHW convolution between two layout changes.
    Conv2dOptions nchw = options;
    nchw.layout = Layout::nchw;
    return to_layout(conv2d(to_layout(x_in, Layout::nhwc, Layout::nchw), weight_in, bias_in, nchw), Layout::nchw,
                     Layout::nhwc);
  }
  // Under autocast the half copies are what the kernels see (and what backward differentiates).
  const DType dt = autocast::compute_dtype(x_in);
  const Tensor x = cast(x_in, dt);
  const Tensor bias = bias_in.defined() ? cast(bias_in, dt) : Tensor();
  detail::check_same("conv2d", x, bias);
  const Conv2dShape s{x.size(0), weight_in.size(1), x.size(nhwc ? 1 : 2), x.size(nhwc ? 2 : 3), weight_in.size(0),
                      weight_in.size(2), weight_in.size(3), options.stride, options.padding};
  CG_CHECK(s.stride >= 1 && s.pad >= 0 && s.out_h() >= 1 && s.out_w() >= 1,
           "conv2d: input {} too small for kernel {}x{} stride {} padding {}", x.str(), s.kh, s.kw,
           s.stride, s.pad);
  if (bias.defined()) CG_CHECK(bias.numel() == s.c_out, "conv2d: bias {} for {} outputs", bias.str(), s.c_out);
  // The NHWC weight is cast inside its layout copy, so the NHWC path takes the parameter as it is.
  if (nhwc) return conv2d_nhwc_gpu(x, weight_in, bias, s, dt);
  const Tensor weight = cast(weight_in, dt);
  detail::check_same("conv2d", x, weight);
  Tensor y = Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, x.dtype(), x.device());
  const void* b = bias.defined() ? bias.raw_data() : nullptr;
  bool cudnn = false;
  if (detail::on_gpu("conv2d", x)) {
    cudnn = use_cudnn(s, dt, x, weight);
    const auto stream = detail::stream_of(x);
    if (cudnn) {
      std::vector<Tensor> scratch;
      cu::conv2d_cudnn_forward(s, dt, x.raw_data(), weight.raw_data(), b, y.raw_data(),
                               detail::workspace(x.device(), scratch), stream);
    } else {
      cu::conv2d_native_forward(s, dt, x.raw_data(), weight.raw_data(), b, y.raw_data(), stream);
    }
  } else {
    detail::dispatch_floating("conv2d", x, [&]<typename T>() {
      kernels::cpu::conv2d_forward<T>(s, x.data<T>(), weight.data<T>(), static_cast<const T*>(b), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<Conv2dBackward>(x.detach(), weight.detach(), bias.defined(), s, cudnn);
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
