#include "engine/impl/linear.h"

#include "engine/ops/dispatch.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/linear.h"

namespace cg::impl {
namespace {

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// The CPU reference (kernels/cpu/linear.h, Eigen), float32 and float64.
class CpuLinear : public LinearImpl {
 public:
  std::string why_unsupported(const LinearProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? "" : "runs float32 and float64 only";
  }
  void forward(const LinearProblem& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) const override {
    ops::detail::dispatch_floating("linear", x, [&]<typename T>() {
      kernels::cpu::linear_forward<T>(p.m, p.k, p.n, x.data<T>(), w.data<T>(), data_or_null<T>(b), y.data<T>());
    });
  }
  void backward(const LinearProblem& p, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                Tensor& db) const override {
    ops::detail::dispatch_floating("linear backward", dy, [&]<typename T>() {
      kernels::cpu::linear_backward<T>(p.m, p.k, p.n, dy.data<T>(), x.data<T>(), w.data<T>(), data_or_null<T>(dx),
                                       dw.data<T>(), data_or_null<T>(db));
    });
  }
};

// cuBLAS (kernels/cuda/linear.h), f32, f16 and bf16.
class CublasLinear : public LinearImpl {
 public:
  std::string why_unsupported(const LinearProblem& p) const override {
    return ops::detail::gpu_dtype(p.dtype) ? "" : "runs float32, float16 and bfloat16 only";
  }
  void forward(const LinearProblem& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) const override {
    kernels::cuda::linear_forward(p.m, p.k, p.n, p.dtype, x.raw_data(), w.raw_data(), raw_or_null(b), y.raw_data(),
                                  ops::detail::stream_of(x));
  }
  void backward(const LinearProblem& p, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                Tensor& db) const override {
    kernels::cuda::linear_backward(p.m, p.k, p.n, p.dtype, dy.raw_data(), x.raw_data(), w.raw_data(), raw_or_null(dx),
                                   dw.raw_data(), raw_or_null(db), ops::detail::stream_of(dy));
  }
};

}  // namespace

void register_linear_cpu(LinearRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuLinear>()});
}
void register_linear_cublas(LinearRegistry& r) {
  r.add_builtin({"cublas", DeviceType::cuda, Choice::automatic, 0, std::make_shared<CublasLinear>()});
}

LinearRegistry& linear_registry() {
  static LinearRegistry* registry = [] {
    auto* r = new LinearRegistry("linear");  // never destroyed, like conv_registry()
    register_linear_cpu(*r);
    register_linear_cublas(*r);
    return r;
  }();
  return *registry;
}

}  // namespace cg::impl
