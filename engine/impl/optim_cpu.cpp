// The CPU references of the optimizer-update and loss-scaling families (kernels/cpu/optim.h,
// amp.h): one kernel call per tensor; found_inf, the device learning rate and AdamW's device step
// are CPU scalars read here on the host.
#include <cmath>

#include "engine/impl/optim.h"
#include "kernels/cpu/amp.h"
#include "kernels/cpu/optim.h"

namespace cg::impl {
namespace {

namespace cpu = kernels::cpu;

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
bool skipped(const Tensor& found_inf) { return found_inf.defined() && found_inf.data<float>()[0] != 0.f; }
float lr_of(float given, const UpdateScalars& s) { return s.lr.defined() ? s.lr.data<float>()[0] : given; }

std::string f32_only(const OptimProblem& p) { return p.dtype == DType::f32 ? "" : "runs float32 only"; }

class CpuOptimizer : public OptimizerImpl {
 public:
  std::string why_unsupported(const OptimProblem& p) const override { return f32_only(p); }

  void sgd(const OptimProblem&, const std::vector<ops::UpdateSlot>& slots, const ops::SgdHyper& h, bool first_step,
           const UpdateScalars& scalars) const override {
    if (skipped(scalars.found_inf)) return;
    const kernels::SgdParams k{lr_of(h.lr, scalars), h.momentum, h.weight_decay, h.dampening, h.nesterov};
    for (const ops::UpdateSlot& s : slots)
      cpu::sgd_update(s.param.numel(), k, first_step, s.param.data<float>(), s.grad.data<float>(),
                      f32_or_null(s.state1));
  }

  void adamw(const OptimProblem&, const std::vector<ops::UpdateSlot>& slots, const ops::AdamWHyper& h,
             const AdamWStep& step, const UpdateScalars& scalars) const override {
    if (skipped(scalars.found_inf)) return;
    const kernels::AdamWParams k{lr_of(h.lr, scalars), h.beta1, h.beta2, h.eps, h.weight_decay};
    const int64_t t = step.device.defined() ? step.device.data<int64_t>()[0] : step.host;
    CG_CHECK(t >= 1, "adamw update: the step must be 1 or more (got {}); advance it before the update", t);
    for (const ops::UpdateSlot& s : slots)
      cpu::adamw_update(s.param.numel(), k, t, s.param.data<float>(), s.grad.data<float>(), s.state1.data<float>(),
                        s.state2.data<float>());
  }

  void advance_step(const OptimProblem&, Tensor& device_step, const Tensor& found_inf) const override {
    if (!skipped(found_inf)) device_step.data<int64_t>()[0] += 1;
  }
};

class CpuLossScale : public LossScaleImpl {
 public:
  std::string why_unsupported(const OptimProblem& p) const override { return f32_only(p); }

  void unscale(const OptimProblem&, const std::vector<Tensor>& grads, const Tensor& inv_scale,
               Tensor& found_inf) const override {
    const float inv = inv_scale.data<float>()[0];
    bool found = false;
    for (const Tensor& g : grads) found |= cpu::unscale_and_check(g.numel(), inv, g.data<float>());
    if (found) found_inf.data<float>()[0] = 1.f;
  }

  // The same float arithmetic as the CUDA kernel (kernels/cuda/optim.cu's update_scale_kernel).
  void update_scale(const OptimProblem&, LossScaleState& state, const Tensor& found_inf,
                    const LossScaleRule& rule) const override {
    float& scale = state.scale.data<float>()[0];
    int64_t& tracker = state.growth_tracker.data<int64_t>()[0];
    if (skipped(found_inf)) {
      scale *= rule.backoff_factor;
      tracker = 0;
    } else if (++tracker >= rule.growth_interval) {
      const float grown = scale * rule.growth_factor;
      if (std::isfinite(grown)) scale = grown;  // like PyTorch: never grow to inf
      tracker = 0;
    }
    state.inv_scale.data<float>()[0] = 1.f / scale;
  }
};

}  // namespace

void register_optimizer_cpu(OptimizerRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuOptimizer>()});
}
void register_loss_scale_cpu(LossScaleRegistry& r) {
  r.add_builtin({"cpu reference", DeviceType::cpu, Choice::automatic, 0, std::make_shared<CpuLossScale>()});
}

}  // namespace cg::impl
