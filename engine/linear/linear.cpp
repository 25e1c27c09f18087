#include "engine/linear/linear.h"

#include "engine/dispatch.h"
#include "kernels/backend.h"
#include "kernels/cpu/linear.h"

namespace cg::impl {
namespace {

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// The CPU reference (kernels/cpu/linear.h, Eigen), float32 and float64.
class CpuLinear : public LinearImpl {
 public:
  const char* refusal(const LinearProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? nullptr : "runs float32 and float64 only";
  }
  void forward(const LinearProblem& p, LinearForwardArgs& a) const override {
    ops::detail::dispatch_floating("linear", a.x, [&]<typename T>() {
      kernels::cpu::linear_forward<T>(p.m, p.k, p.n, a.x.data<T>(), a.w.data<T>(), data_or_null<T>(a.b), a.y.data<T>());
    });
  }
  void backward(const LinearProblem& p, LinearBackwardArgs& a) const override {
    ops::detail::dispatch_floating("linear backward", a.dy, [&]<typename T>() {
      kernels::cpu::linear_backward<T>(p.m, p.k, p.n, a.dy.data<T>(), a.x.data<T>(), a.w.data<T>(),
                                       data_or_null<T>(a.dx), a.dw.data<T>(), data_or_null<T>(a.db));
    });
  }
};

}  // namespace

// The GPU's implementations only where the build has them, as in conv_registry().
LinearRegistry& linear_registry() {
  static LinearRegistry* registry = [] {
    std::vector<LinearRegistry::Entry> entries{
        {"cpu reference", DeviceType::cpu, ImplKey::reference, std::make_shared<CpuLinear>()}};
    if constexpr (kernels::kCudaLibraries) entries.push_back(linear_cublas_entry());
    if constexpr (kernels::kCudaBuild) entries.push_back(linear_native_entry());
    return new LinearRegistry("linear", std::move(entries));  // never destroyed, like conv_registry()
  }();
  return *registry;
}

Selection linear_selection(const LinearProblem& p) {
  if (p.device.is_cpu()) return {.keys = {ImplKey::reference}};
  return {.keys = {ImplKey::cublas, ImplKey::native}};  // cuBLAS where it is built in
}

}  // namespace cg::impl
