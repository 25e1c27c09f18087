// The CUDA implementations of the optimizer-update and loss-scaling families
// (kernels/cuda/optim.h): one multi-tensor launch per list on the current stream; found_inf, the
// learning rate and AdamW's step are read on the device, so the host never waits.
#include "engine/impl/optim.h"
#include "engine/ops/dispatch.h"
#include "kernels/cuda/optim.h"

namespace cg::impl {
namespace {

namespace cu = kernels::cuda;
using ops::detail::stream_of;

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

std::vector<cu::TensorSlot> slots_of(const std::vector<ops::UpdateSlot>& slots) {
  std::vector<cu::TensorSlot> out;
  out.reserve(slots.size());
  for (const ops::UpdateSlot& s : slots)
    out.push_back({s.param.numel(), s.param.data<float>(), s.grad.data<float>(), f32_or_null(s.state1),
                   f32_or_null(s.state2)});
  return out;
}

std::string f32_only(const OptimProblem& p) { return p.dtype == DType::f32 ? "" : "runs float32 only"; }

class CudaOptimizer : public OptimizerImpl {
 public:
  std::string why_unsupported(const OptimProblem& p) const override { return f32_only(p); }

  void sgd(const OptimProblem&, const std::vector<ops::UpdateSlot>& slots, const ops::SgdHyper& h, bool first_step,
           const UpdateScalars& scalars) const override {
    const kernels::SgdParams k{h.lr, h.momentum, h.weight_decay, h.dampening, h.nesterov};
    cu::sgd_update_multi(slots_of(slots), k, first_step, f32_or_null(scalars.found_inf), stream_of(slots.front().param),
                         f32_or_null(scalars.lr));
  }

  void adamw(const OptimProblem& p, const std::vector<ops::UpdateSlot>& slots, const ops::AdamWHyper& h,
             const AdamWStep& step, const UpdateScalars& scalars) const override {
    CG_CHECK(step.device.defined() && step.device.device() == p.device && step.device.dtype() == DType::i64,
             "adamw update on {}: the step must be an int64 scalar on that device (got {})", p.device.str(),
             step.device.defined() ? step.device.str() : std::string("a host step"));
    const kernels::AdamWParams k{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay};
    cu::adamw_update_multi(slots_of(slots), k, step.device.data<int64_t>(), f32_or_null(scalars.found_inf),
                           stream_of(slots.front().param), f32_or_null(scalars.lr));
  }

  void advance_step(const OptimProblem&, Tensor& device_step, const Tensor& found_inf) const override {
    cu::advance_step(device_step.data<int64_t>(), f32_or_null(found_inf), stream_of(device_step));
  }
};

class CudaLossScale : public LossScaleImpl {
 public:
  std::string why_unsupported(const OptimProblem& p) const override { return f32_only(p); }

  void unscale(const OptimProblem&, const std::vector<Tensor>& grads, const Tensor& inv_scale,
               Tensor& found_inf) const override {
    std::vector<cu::TensorSlot> slots;
    slots.reserve(grads.size());
    for (const Tensor& g : grads) slots.push_back({g.numel(), g.data<float>(), nullptr, nullptr, nullptr});
    cu::unscale_and_check_multi(slots, inv_scale.data<float>(), found_inf.data<float>(), stream_of(found_inf));
  }

  void update_scale(const OptimProblem&, LossScaleState& s, const Tensor& found_inf,
                    const LossScaleRule& rule) const override {
    cu::update_loss_scale(s.scale.data<float>(), s.inv_scale.data<float>(), s.growth_tracker.data<int64_t>(),
                          found_inf.data<float>(), rule.growth_factor, rule.backoff_factor, rule.growth_interval,
                          stream_of(s.scale));
  }
};

}  // namespace

void register_optimizer_cuda(OptimizerRegistry& r) {
  r.add_builtin({"cuda multi-tensor", DeviceType::cuda, Choice::automatic, 0, std::make_shared<CudaOptimizer>()});
}
void register_loss_scale_cuda(LossScaleRegistry& r) {
  r.add_builtin({"cuda multi-tensor", DeviceType::cuda, Choice::automatic, 0, std::make_shared<CudaLossScale>()});
}

}  // namespace cg::impl
