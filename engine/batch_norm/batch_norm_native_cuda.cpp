// The hand-written GPU batch norm (kernels/cuda/batch_norm.h): every mode and layout; x and its
// gradients in f32, f16 or bf16, per-channel tensors float32.
#include "engine/batch_norm/batch_norm.h"
#include "engine/dispatch.h"
#include "kernels/cuda/batch_norm.h"

namespace cg::impl {
namespace {

namespace cu = kernels::cuda;

using ops::detail::f32;
using ops::detail::f32m;
using ops::detail::raw_or_null;
using ops::detail::raw_or_null_m;

class NativeBatchNorm : public BatchNormImpl {
 public:
  const char* refusal(const BatchNormProblem& p) const override {
    return ops::detail::gpu_dtype(p.dtype) ? nullptr : "does not support it";
  }

  void forward(const BatchNormProblem& p, BatchNormForwardArgs& a) const override {
    const auto stream = ops::detail::stream_of(a.x);
    std::vector<Tensor> scratch;  // kept until the kernels are enqueued (then reused in stream order)
    const auto ws = ops::detail::workspace(a.x.device(), scratch);
    const float eps = float(a.eps);
    if (p.training) {
      cu::batch_norm_forward_train(p.shape, p.dtype, a.x.raw_data(), f32(a.weight), f32(a.bias), eps, float(a.momentum),
                                  f32m(a.running_mean), f32m(a.running_var), a.y.raw_data(), f32m(a.save_mean),
                                  f32m(a.save_invstd), p.activation, raw_or_null(a.residual), ws, stream);
    } else {
      cu::batch_norm_forward_eval(p.shape, p.dtype, a.x.raw_data(), f32(a.weight), f32(a.bias), f32(a.running_mean),
                                 f32(a.running_var), eps, a.y.raw_data(), p.activation, raw_or_null(a.residual), ws,
                                 stream);
    }
  }

  void backward(const BatchNormProblem& p, BatchNormBackwardArgs& a) const override {
    const auto stream = ops::detail::stream_of(a.dy);
    std::vector<Tensor> scratch;
    const auto ws = ops::detail::workspace(a.dy.device(), scratch);
    if (p.training) {
      cu::batch_norm_backward_train(p.shape, p.dtype, a.dy.raw_data(), a.x.raw_data(), f32(a.gamma), f32(a.mean),
                                   f32(a.stat), a.dx.raw_data(), f32m(a.dgamma), f32m(a.dbeta), raw_or_null(a.relu_y),
                                   raw_or_null_m(a.d_residual), ws, stream);
    } else {
      cu::batch_norm_backward_eval(p.shape, p.dtype, a.dy.raw_data(), a.x.raw_data(), f32(a.gamma), f32(a.mean),
                                  f32(a.stat), float(a.eps), a.dx.raw_data(), f32m(a.dgamma), f32m(a.dbeta),
                                  raw_or_null(a.relu_y), raw_or_null_m(a.d_residual), ws, stream);
    }
  }

  // SyncBatchNorm: the same kernels cut around the sum (kernels/cuda/batch_norm.h).
  void local_moments(const BatchNormProblem& p, const BatchNormForwardArgs& a, const Tensor& moments) const override {
    std::vector<Tensor> scratch;
    cu::batch_norm_local_moments(p.shape, p.dtype, a.x.raw_data(), moments.data<double>(),
                                ops::detail::workspace(a.x.device(), scratch), ops::detail::stream_of(a.x));
  }

  void forward_with_moments(const BatchNormProblem& p, const BatchNormForwardArgs& a,
                            const Tensor& moments) const override {
    std::vector<Tensor> scratch;
    cu::batch_norm_forward_with_moments(p.shape, p.dtype, a.x.raw_data(), f32(a.weight), f32(a.bias), float(a.eps),
                                       float(a.momentum), moments.data<double>(), f32m(a.running_mean),
                                       f32m(a.running_var), a.y.raw_data(), f32m(a.save_mean), f32m(a.save_invstd),
                                       p.activation, raw_or_null(a.residual),
                                       ops::detail::workspace(a.x.device(), scratch), ops::detail::stream_of(a.x));
  }

  void local_grad_sums(const BatchNormProblem& p, const BatchNormBackwardArgs& a, const Tensor& sums) const override {
    std::vector<Tensor> scratch;
    cu::batch_norm_local_grad_sums(p.shape, p.dtype, a.dy.raw_data(), a.x.raw_data(), f32(a.mean), f32(a.stat),
                                  f32m(a.dgamma), f32m(a.dbeta), sums.data<double>(), raw_or_null(a.relu_y),
                                  raw_or_null_m(a.d_residual), ops::detail::workspace(a.dy.device(), scratch),
                                  ops::detail::stream_of(a.dy));
  }

  void backward_with_sums(const BatchNormProblem& p, const BatchNormBackwardArgs& a, const Tensor& sums,
                          const Tensor& moments) const override {
    std::vector<Tensor> scratch;
    cu::batch_norm_backward_with_sums(p.shape, p.dtype, a.dy.raw_data(), a.x.raw_data(), f32(a.gamma), f32(a.mean),
                                     f32(a.stat), sums.data<double>(), moments.data<double>(), a.dx.raw_data(),
                                     raw_or_null(a.relu_y), raw_or_null(a.d_residual),
                                     ops::detail::workspace(a.dy.device(), scratch), ops::detail::stream_of(a.dy));
  }
};

}  // namespace

BatchNormEntry batch_norm_native_entry() {
  return {"native", DeviceType::cuda, ImplKey::native, std::make_shared<NativeBatchNorm>()};
}

}  // namespace cg::impl
