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
  const char* refusal(const LinearProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? nullptr : "runs float32 and float64 only";
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

// The GPU implementations (kernels/cuda/linear.h), f32, f16 and bf16: cuBLAS, and cudagrad's own
// kernel, which takes over where cuBLAS is not in the build (the emulated GPU).
template <auto Forward, auto Backward>
class CudaLinear : public LinearImpl {
 public:
  const char* refusal(const LinearProblem& p) const override {
    return ops::detail::gpu_dtype(p.dtype) ? nullptr : "runs float32, float16 and bfloat16 only";
  }
  void forward(const LinearProblem& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) const override {
    std::vector<Tensor> scratch;  // cuBLAS's workspace, from the caching allocator (or a graph's pool)
    Forward(p.m, p.k, p.n, p.dtype, x.raw_data(), w.raw_data(), raw_or_null(b), y.raw_data(), ops::detail::stream_of(x),
            ops::detail::workspace(x.device(), scratch));
  }
  void backward(const LinearProblem& p, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                Tensor& db) const override {
    std::vector<Tensor> scratch;
    Backward(p.m, p.k, p.n, p.dtype, dy.raw_data(), x.raw_data(), w.raw_data(), raw_or_null(dx), dw.raw_data(),
             raw_or_null(db), ops::detail::stream_of(dy), ops::detail::workspace(dy.device(), scratch));
  }
};
using CublasLinear = CudaLinear<kernels::cuda::linear_cublas_forward, kernels::cuda::linear_cublas_backward>;
using NativeLinear = CudaLinear<kernels::cuda::linear_native_forward, kernels::cuda::linear_native_backward>;

}  // namespace

// The GPU's implementations only where the build has them, as in conv_registry().
LinearRegistry& linear_registry() {
  static LinearRegistry* registry = [] {
    std::vector<LinearRegistry::Entry> entries{
        {"cpu reference", DeviceType::cpu, "reference", std::make_shared<CpuLinear>()}};
#ifdef CUDAGRAD_WITH_CUDA_LIBRARIES
    entries.push_back({"cublas", DeviceType::cuda, "cublas", std::make_shared<CublasLinear>()});
#endif
#ifdef CUDAGRAD_WITH_CUDA
    entries.push_back({"native", DeviceType::cuda, "native", std::make_shared<NativeLinear>()});
#endif
    return new LinearRegistry("linear", std::move(entries));  // never destroyed, like conv_registry()
  }();
  return *registry;
}

Selection linear_selection(const LinearProblem& p) {
  if (p.device.is_cpu()) return {.keys = {"reference"}};
  return {.keys = {"cublas", "native"}};  // cuBLAS where it is built in
}

}  // namespace cg::impl
