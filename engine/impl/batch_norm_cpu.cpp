// The CPU reference batch norm (kernels/cpu/batchnorm.h), float32 and float64, any layout
// (channels-last is the same computation over kernels::channels_last_shape).
#include "engine/impl/batch_norm.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/batchnorm.h"

namespace cg::impl {
namespace {

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

class CpuBatchNorm : public BatchNormImpl {
 public:
  std::string why_unsupported(const BatchNormProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? "" : "runs float32 and float64 only";
  }

  void forward(const BatchNormProblem& p, const BatchNormForward& a) const override {
    ops::detail::dispatch_floating("batch_norm", a.x, [&]<typename T>() {
      const T* r = data_or_null<T>(a.residual);
      if (p.training) {
        kernels::cpu::batchnorm_forward_train<T>(p.shape, a.x.data<T>(), a.weight.data<T>(), a.bias.data<T>(),
                                                 T(a.eps), T(a.momentum), a.running_mean.data<T>(),
                                                 a.running_var.data<T>(), a.y.data<T>(), a.save_mean.data<T>(),
                                                 a.save_invstd.data<T>(), p.activation, r);
      } else {
        kernels::cpu::batchnorm_forward_eval<T>(p.shape, a.x.data<T>(), a.weight.data<T>(), a.bias.data<T>(),
                                                a.running_mean.data<T>(), a.running_var.data<T>(), T(a.eps),
                                                a.y.data<T>(), p.activation, r);
      }
    });
  }

  void backward(const BatchNormProblem& p, const BatchNormBackwardArgs& a) const override {
    ops::detail::dispatch_floating("batch_norm backward", a.dy, [&]<typename T>() {
      const T* relu_y = data_or_null<T>(a.relu_y);
      T* d_res = data_or_null<T>(a.d_residual);
      if (p.training) {
        kernels::cpu::batchnorm_backward_train<T>(p.shape, a.dy.data<T>(), a.x.data<T>(), a.gamma.data<T>(),
                                                  a.mean.data<T>(), a.stat.data<T>(), a.dx.data<T>(),
                                                  a.dgamma.data<T>(), a.dbeta.data<T>(), relu_y, d_res);
      } else {
        kernels::cpu::batchnorm_backward_eval<T>(p.shape, a.dy.data<T>(), a.x.data<T>(), a.gamma.data<T>(),
                                                 a.mean.data<T>(), a.stat.data<T>(), T(a.eps), a.dx.data<T>(),
                                                 a.dgamma.data<T>(), a.dbeta.data<T>(), relu_y, d_res);
      }
    });
  }
};

}  // namespace

void register_batch_norm_cpu(BatchNormRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuBatchNorm>()});
}

}  // namespace cg::impl
