#include "engine/impl/loss.h"

#include "engine/ops/dispatch.h"
#include "kernels/cpu/loss.h"
#include "kernels/cuda/device_error.h"
#include "kernels/cuda/head.h"

namespace cg::impl {
namespace {

// The CPU reference (kernels/cpu/loss.h), float32 and float64; labels checked on the host.
class CpuLoss : public LossImpl {
 public:
  std::string why_unsupported(const LossProblem& p) const override {
    return p.dtype == DType::f32 || p.dtype == DType::f64 ? "" : "runs float32 and float64 only";
  }
  void forward(const LossProblem& p, const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs,
               Tensor& hits) const override {
    const int64_t* lab = labels.data<int64_t>();
    for (int64_t i = 0; i < p.n; ++i)
      CG_CHECK(lab[i] >= 0 && lab[i] < p.classes, "cross_entropy: label {} at row {} outside [0, {})", lab[i], i,
               p.classes);
    ops::detail::dispatch_floating("cross_entropy", logits, [&]<typename T>() {
      hits.data<int64_t>()[0] = kernels::cpu::cross_entropy_forward<T>(p.n, p.classes, logits.data<T>(), lab,
                                                                       loss.data<T>(), probs.data<T>());
    });
  }
  void backward(const LossProblem& p, const Tensor& dloss, const Tensor& probs, const Tensor& labels,
                Tensor& dlogits) const override {
    ops::detail::dispatch_floating("cross_entropy backward", probs, [&]<typename T>() {
      kernels::cpu::cross_entropy_backward<T>(p.n, p.classes, T(dloss.item()), probs.data<T>(),
                                              labels.data<int64_t>(), dlogits.data<T>());
    });
  }
};

// The CUDA kernels (kernels/cuda/head.h), float32.
class CudaLoss : public LossImpl {
 public:
  std::string why_unsupported(const LossProblem& p) const override {
    return p.dtype == DType::f32 ? "" : "runs float32 only (cast the logits first)";
  }
  void forward(const LossProblem& p, const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs,
               Tensor& hits) const override {
    // The kernel checks the labels and records a bad one for the host (kernels/cuda/device_error.h):
    // reported when the host next reads from the device (the loss) or here, at the next call.
    // Checking them here would stall the host every step.
    kernels::cuda::raise_device_error();
    kernels::cuda::cross_entropy_forward(p.n, p.classes, logits.data<float>(), labels.data<int64_t>(),
                                         loss.data<float>(), probs.data<float>(), hits.data<int64_t>(),
                                         ops::detail::stream_of(logits));
  }
  void backward(const LossProblem& p, const Tensor& dloss, const Tensor& probs, const Tensor& labels,
                Tensor& dlogits) const override {
    // dloss stays on the device (a loss scale, for instance): the host never reads it.
    kernels::cuda::cross_entropy_backward(p.n, p.classes, dloss.data<float>(), probs.data<float>(),
                                          labels.data<int64_t>(), dlogits.data<float>(), ops::detail::stream_of(probs));
  }
};

}  // namespace

void register_loss_cpu(LossRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuLoss>()});
}
void register_loss_cuda(LossRegistry& r) {
  r.add_builtin({"cuda", DeviceType::cuda, Choice::automatic, 0, std::make_shared<CudaLoss>()});
}

LossRegistry& loss_registry() {
  static LossRegistry* registry = [] {
    auto* r = new LossRegistry("loss");  // never destroyed, like conv_registry()
    register_loss_cpu(*r);
    register_loss_cuda(*r);
    return r;
  }();
  return *registry;
}

}  // namespace cg::impl
