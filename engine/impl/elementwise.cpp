#include "engine/impl/elementwise.h"

#include "engine/ops/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace cg::impl {
namespace {

namespace cpu = kernels::cpu;
namespace cu = kernels::cuda;
using ops::detail::dispatch_floating;
using ops::detail::stream_of;

// The CPU reference (kernels/cpu/elementwise.h), float32 and float64.
class CpuElementwise : public ElementwiseImpl {
 public:
  std::string why_unsupported(const ElementwiseProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? "" : "runs float32 and float64 only";
  }
  void relu(const ElementwiseProblem& p, const Tensor& x, Tensor& y) const override {
    dispatch_floating("relu", x, [&]<typename T>() { cpu::relu_forward<T>(p.n, x.data<T>(), y.data<T>()); });
  }
  void relu_backward(const ElementwiseProblem& p, const Tensor& dy, const Tensor& y, Tensor& dx) const override {
    dispatch_floating("relu backward", dy,
                      [&]<typename T>() { cpu::relu_backward<T>(p.n, dy.data<T>(), y.data<T>(), dx.data<T>()); });
  }
  void add(const ElementwiseProblem& p, const Tensor& a, const Tensor& b, Tensor& y) const override {
    dispatch_floating("add", a, [&]<typename T>() { cpu::add<T>(p.n, a.data<T>(), b.data<T>(), y.data<T>()); });
  }
  void add_relu(const ElementwiseProblem& p, const Tensor& a, const Tensor& b, Tensor& y) const override {
    dispatch_floating("add_relu", a,
                      [&]<typename T>() { cpu::add_relu<T>(p.n, a.data<T>(), b.data<T>(), y.data<T>()); });
  }
  void scale(const ElementwiseProblem& p, const Tensor& x, double alpha, Tensor& y) const override {
    dispatch_floating("scale", x, [&]<typename T>() { cpu::scale<T>(p.n, T(alpha), x.data<T>(), y.data<T>()); });
  }
  void accumulate(const ElementwiseProblem& p, const Tensor& src, Tensor& dst) const override {
    dispatch_floating("accumulate_", dst, [&]<typename T>() { cpu::accumulate<T>(p.n, src.data<T>(), dst.data<T>()); });
  }
};

// The CUDA kernels (kernels/cuda/elementwise.h), f32, f16 and bf16, on the current stream.
class CudaElementwise : public ElementwiseImpl {
 public:
  std::string why_unsupported(const ElementwiseProblem& p) const override {
    return ops::detail::gpu_dtype(p.dtype) ? "" : "runs float32, float16 and bfloat16 only";
  }
  void relu(const ElementwiseProblem& p, const Tensor& x, Tensor& y) const override {
    cu::relu_forward(p.n, p.dtype, x.raw_data(), y.raw_data(), stream_of(x));
  }
  void relu_backward(const ElementwiseProblem& p, const Tensor& dy, const Tensor& y, Tensor& dx) const override {
    cu::relu_backward(p.n, p.dtype, dy.raw_data(), y.raw_data(), dx.raw_data(), stream_of(dy));
  }
  void add(const ElementwiseProblem& p, const Tensor& a, const Tensor& b, Tensor& y) const override {
    cu::add(p.n, p.dtype, a.raw_data(), b.raw_data(), y.raw_data(), stream_of(a));
  }
  void add_relu(const ElementwiseProblem& p, const Tensor& a, const Tensor& b, Tensor& y) const override {
    cu::add_relu(p.n, p.dtype, a.raw_data(), b.raw_data(), y.raw_data(), stream_of(a));
  }
  void scale(const ElementwiseProblem& p, const Tensor& x, double alpha, Tensor& y) const override {
    cu::scale(p.n, p.dtype, float(alpha), x.raw_data(), y.raw_data(), stream_of(x));
  }
  void accumulate(const ElementwiseProblem& p, const Tensor& src, Tensor& dst) const override {
    cu::accumulate(p.n, p.dtype, src.raw_data(), dst.raw_data(), stream_of(dst));
  }
};

}  // namespace

void register_elementwise_cpu(ElementwiseRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuElementwise>()});
}
void register_elementwise_cuda(ElementwiseRegistry& r) {
  r.add_builtin({"cuda", DeviceType::cuda, Choice::automatic, 0, std::make_shared<CudaElementwise>()});
}

ElementwiseRegistry& elementwise_registry() {
  static ElementwiseRegistry* registry = [] {
    auto* r = new ElementwiseRegistry("elementwise");  // never destroyed, like conv_registry()
    register_elementwise_cpu(*r);
    register_elementwise_cuda(*r);
    return r;
  }();
  return *registry;
}

}  // namespace cg::impl
