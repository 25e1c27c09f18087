#include "engine/impl/pool.h"

#include "engine/ops/dispatch.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/head.h"

namespace cg::impl {
namespace {

// The CPU reference (kernels/cpu/pool.h), float32 and float64.
class CpuPool : public PoolImpl {
 public:
  std::string why_unsupported(const PoolProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? "" : "runs float32 and float64 only";
  }
  void forward(const PoolProblem& p, const Tensor& x, Tensor& y) const override {
    ops::detail::dispatch_floating("global_avg_pool", x, [&]<typename T>() {
      if (p.layout == ops::Layout::nhwc)
        kernels::cpu::global_avg_pool_nhwc_forward<T>(p.n, p.hw, p.c, x.data<T>(), y.data<T>());
      else kernels::cpu::global_avg_pool_forward<T>(p.n * p.c, p.hw, x.data<T>(), y.data<T>());
    });
  }
  void backward(const PoolProblem& p, const Tensor& dy, Tensor& dx) const override {
    ops::detail::dispatch_floating("global_avg_pool backward", dy, [&]<typename T>() {
      if (p.layout == ops::Layout::nhwc)
        kernels::cpu::global_avg_pool_nhwc_backward<T>(p.n, p.hw, p.c, dy.data<T>(), dx.data<T>());
      else kernels::cpu::global_avg_pool_backward<T>(p.n * p.c, p.hw, dy.data<T>(), dx.data<T>());
    });
  }
};

// The CUDA kernels (kernels/cuda/head.h), f32, f16 and bf16.
class CudaPool : public PoolImpl {
 public:
  std::string why_unsupported(const PoolProblem& p) const override {
    return ops::detail::gpu_dtype(p.dtype) ? "" : "runs float32, float16 and bfloat16 only";
  }
  void forward(const PoolProblem& p, const Tensor& x, Tensor& y) const override {
    const auto stream = ops::detail::stream_of(x);
    if (p.layout == ops::Layout::nhwc)
      kernels::cuda::global_avg_pool_nhwc_forward(p.n, p.hw, p.c, p.dtype, x.raw_data(), y.raw_data(), stream);
    else kernels::cuda::global_avg_pool_forward(p.n * p.c, p.hw, p.dtype, x.raw_data(), y.raw_data(), stream);
  }
  void backward(const PoolProblem& p, const Tensor& dy, Tensor& dx) const override {
    const auto stream = ops::detail::stream_of(dy);
    if (p.layout == ops::Layout::nhwc)
      kernels::cuda::global_avg_pool_nhwc_backward(p.n, p.hw, p.c, p.dtype, dy.raw_data(), dx.raw_data(), stream);
    else kernels::cuda::global_avg_pool_backward(p.n * p.c, p.hw, p.dtype, dy.raw_data(), dx.raw_data(), stream);
  }
};

}  // namespace

void register_pool_cpu(PoolRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuPool>()});
}
void register_pool_cuda(PoolRegistry& r) {
  r.add_builtin({"cuda", DeviceType::cuda, Choice::automatic, 0, std::make_shared<CudaPool>()});
}

PoolRegistry& pool_registry() {
  static PoolRegistry* registry = [] {
    auto* r = new PoolRegistry("pool");  // never destroyed, like conv_registry()
    register_pool_cpu(*r);
    register_pool_cuda(*r);
    return r;
  }();
  return *registry;
}

}  // namespace cg::impl
