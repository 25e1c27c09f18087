// The CPU reference batch norm (kernels/cpu/batch_norm.h), float32 and float64, any layout
// (channels-last is the same computation over kernels::channels_last_shape).
#include "engine/batch_norm/batch_norm.h"
#include "engine/dispatch.h"
#include "kernels/cpu/batch_norm.h"

namespace cg::impl {
namespace {

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

class CpuBatchNorm : public BatchNormImpl {
 public:
  const char* refusal(const BatchNormProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? nullptr : "runs float32 and float64 only";
  }

  void forward(const BatchNormProblem& p, BatchNormForwardArgs& a) const override {
    ops::detail::dispatch_floating("batch_norm", a.x, [&]<typename T>() {
      const T* r = data_or_null<T>(a.residual);
      if (p.training) {
        kernels::cpu::batch_norm_forward_train<T>(p.shape, a.x.data<T>(), a.weight.data<T>(), a.bias.data<T>(),
                                                 T(a.eps), T(a.momentum), a.running_mean.data<T>(),
                                                 a.running_var.data<T>(), a.y.data<T>(), a.save_mean.data<T>(),
                                                 a.save_invstd.data<T>(), p.activation, r);
      } else {
        kernels::cpu::batch_norm_forward_eval<T>(p.shape, a.x.data<T>(), a.weight.data<T>(), a.bias.data<T>(),
                                                a.running_mean.data<T>(), a.running_var.data<T>(), T(a.eps),
                                                a.y.data<T>(), p.activation, r);
      }
    });
  }

  void backward(const BatchNormProblem& p, BatchNormBackwardArgs& a) const override {
    ops::detail::dispatch_floating("batch_norm backward", a.dy, [&]<typename T>() {
      const T* relu_y = data_or_null<T>(a.relu_y);
      T* d_res = data_or_null<T>(a.d_residual);
      if (p.training) {
        kernels::cpu::batch_norm_backward_train<T>(p.shape, a.dy.data<T>(), a.x.data<T>(), a.gamma.data<T>(),
                                                  a.mean.data<T>(), a.stat.data<T>(), a.dx.data<T>(),
                                                  a.dgamma.data<T>(), a.dbeta.data<T>(), relu_y, d_res);
      } else {
        kernels::cpu::batch_norm_backward_eval<T>(p.shape, a.dy.data<T>(), a.x.data<T>(), a.gamma.data<T>(),
                                                 a.mean.data<T>(), a.stat.data<T>(), T(a.eps), a.dx.data<T>(),
                                                 a.dgamma.data<T>(), a.dbeta.data<T>(), relu_y, d_res);
      }
    });
  }

  void local_moments(const BatchNormProblem& p, const BatchNormForwardArgs& a, const Tensor& moments) const override {
    ops::detail::dispatch_floating("batch_norm (SyncBatchNorm statistics)", a.x, [&]<typename T>() {
      kernels::cpu::batch_norm_local_moments<T>(p.shape, a.x.data<T>(), moments.data<double>());
    });
  }

  void forward_with_moments(const BatchNormProblem& p, const BatchNormForwardArgs& a,
                            const Tensor& moments) const override {
    ops::detail::dispatch_floating("batch_norm (SyncBatchNorm)", a.x, [&]<typename T>() {
      kernels::cpu::batch_norm_forward_with_moments<T>(
          p.shape, a.x.data<T>(), a.weight.data<T>(), a.bias.data<T>(), T(a.eps), T(a.momentum),
          moments.data<double>(), a.running_mean.data<T>(), a.running_var.data<T>(), a.y.data<T>(),
          a.save_mean.data<T>(), a.save_invstd.data<T>(), p.activation, data_or_null<T>(a.residual));
    });
  }

  void local_grad_sums(const BatchNormProblem& p, const BatchNormBackwardArgs& a, const Tensor& sums) const override {
    ops::detail::dispatch_floating("batch_norm backward (SyncBatchNorm sums)", a.dy, [&]<typename T>() {
      kernels::cpu::batch_norm_local_grad_sums<T>(p.shape, a.dy.data<T>(), a.x.data<T>(), a.mean.data<T>(),
                                                 a.stat.data<T>(), a.dgamma.data<T>(), a.dbeta.data<T>(),
                                                 sums.data<double>(), a.dx.data<T>(), data_or_null<T>(a.relu_y),
                                                 data_or_null<T>(a.d_residual));
    });
  }

  void backward_with_sums(const BatchNormProblem& p, const BatchNormBackwardArgs& a, const Tensor& sums,
                          const Tensor& moments) const override {
    ops::detail::dispatch_floating("batch_norm backward (SyncBatchNorm)", a.dy, [&]<typename T>() {
      kernels::cpu::batch_norm_backward_with_sums<T>(
          p.shape, a.dy.data<T>(), a.x.data<T>(), a.gamma.data<T>(), a.mean.data<T>(), a.stat.data<T>(),
          sums.data<double>(), moments.data<double>()[2 * p.shape.c], a.dx.data<T>(), data_or_null<T>(a.relu_y),
          data_or_null<T>(a.d_residual));
    });
  }
};

}  // namespace

BatchNormEntry batch_norm_cpu_entry() {
  return {"cpu reference", DeviceType::cpu, ImplKey::reference, std::make_shared<CpuBatchNorm>()};
}

}  // namespace cg::impl
