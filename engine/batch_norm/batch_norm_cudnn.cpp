// cuDNN's batch norm (kernels/cuda/cudnn.h): training forward and backward, eval forward. cuDNN
// has no eval-mode backward, so such a layer is refused rather than run by other kernels.
#include "engine/batch_norm/batch_norm.h"
#include "engine/dispatch.h"
#include "kernels/cuda/cudnn.h"

namespace cg::impl {
namespace {

namespace cu = kernels::cuda;

using ops::detail::f32;
using ops::detail::f32m;
using ops::detail::raw_or_null;

class CudnnBatchNorm : public BatchNormImpl {
 public:
  const char* refusal(const BatchNormProblem& p) const override {
    if (!ops::detail::gpu_dtype(p.dtype) || !cu::batch_norm_cudnn_supports(p.shape, p.dtype))
      return "does not support it";
    if (p.cross_replica && p.training)
      return "computes its statistics inside cuDNN, so it cannot combine them over ranks (model.sync_batchnorm); "
             "use kernels.batch_norm=native";
    if (!p.training && p.needs_backward)
      return "has no eval-mode backward (cuDNN offers none); use kernels.batch_norm=native";
    return nullptr;
  }

  void forward(const BatchNormProblem& p, BatchNormForwardArgs& a) const override {
    const auto stream = ops::detail::stream_of(a.x);
    const float eps = float(a.eps);
    if (p.training) {
      cu::batch_norm_cudnn_forward_train(p.shape, p.dtype, a.x.raw_data(), f32(a.weight), f32(a.bias), eps,
                                        float(a.momentum), f32m(a.running_mean), f32m(a.running_var), a.y.raw_data(),
                                        f32m(a.save_mean), f32m(a.save_invstd), p.activation, raw_or_null(a.residual),
                                        stream);
    } else {
      cu::batch_norm_cudnn_forward_eval(p.shape, p.dtype, a.x.raw_data(), f32(a.weight), f32(a.bias),
                                       f32(a.running_mean), f32(a.running_var), eps, a.y.raw_data(), p.activation,
                                       raw_or_null(a.residual), stream);
    }
  }

  void backward(const BatchNormProblem& p, BatchNormBackwardArgs& a) const override {
    CG_CHECK(p.training, "{}: kernels.batch_norm=cudnn has no eval-mode backward", p.layer);
    std::vector<Tensor> scratch;
    cu::batch_norm_cudnn_backward_train(p.shape, p.dtype, a.dy.raw_data(), a.x.raw_data(), f32(a.gamma), f32(a.mean),
                                       f32(a.stat), float(a.eps), a.dx.raw_data(), f32m(a.dgamma), f32m(a.dbeta),
                                       raw_or_null(a.relu_y),
                                       a.d_residual.defined() ? a.d_residual.raw_data() : nullptr,
                                       ops::detail::workspace(a.dy.device(), scratch), ops::detail::stream_of(a.dy));
  }
};

}  // namespace

BatchNormEntry batch_norm_cudnn_entry() {
  return {"cudnn", DeviceType::cuda, ImplKey::cudnn, std::make_shared<CudnnBatchNorm>()};
}

}  // namespace cg::impl
