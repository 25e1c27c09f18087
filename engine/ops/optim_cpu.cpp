// The CPU's optimizer updates and loss scaling (engine/ops/optim_devices.h over kernels/cpu/optim.h,
// amp.h): one kernel call per tensor; found_inf, the device learning rate and AdamW's device step
// are CPU scalars read here on the host.
#include <cmath>

#include "engine/ops/optim_devices.h"
#include "kernels/cpu/amp.h"
#include "kernels/cpu/optim.h"
#include "util/check.h"

namespace cg::ops::detail::cpu {
namespace {

namespace k = kernels::cpu;

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
bool skipped(const Tensor& found_inf) { return found_inf.defined() && found_inf.data<float>()[0] != 0.f; }
float lr_of(float given, const UpdateScalars& s) { return s.lr.defined() ? s.lr.data<float>()[0] : given; }

}  // namespace

void sgd(const std::vector<UpdateSlot>& slots, const SgdOptions& h, bool first_step, const UpdateScalars& scalars) {
  if (skipped(scalars.found_inf)) return;
  const SgdOptions p{lr_of(h.lr, scalars), h.momentum, h.weight_decay, h.dampening, h.nesterov};
  for (const UpdateSlot& s : slots)
    k::sgd_update(s.param.numel(), p, first_step, s.param.data<float>(), s.grad.data<float>(), f32_or_null(s.state1));
}

void adamw(const std::vector<UpdateSlot>& slots, const AdamWOptions& h, const AdamWStep& step,
           const UpdateScalars& scalars) {
  if (skipped(scalars.found_inf)) return;
  const AdamWOptions p{lr_of(h.lr, scalars), h.beta1, h.beta2, h.eps, h.weight_decay};
  const int64_t t = step.device.defined() ? step.device.data<int64_t>()[0] : step.host;
  CG_CHECK(t >= 1, "adamw update: the step must be 1 or more (got {}); advance it before the update", t);
  for (const UpdateSlot& s : slots)
    k::adamw_update(s.param.numel(), p, t, s.param.data<float>(), s.grad.data<float>(), s.state1.data<float>(),
                    s.state2.data<float>());
}

void advance_step(Tensor& device_step, const Tensor& found_inf) {
  if (!skipped(found_inf)) device_step.data<int64_t>()[0] += 1;
}

void unscale(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf) {
  const float inv = inv_scale.data<float>()[0];
  bool found = false;
  for (const Tensor& g : grads) found |= k::unscale_and_check(g.numel(), inv, g.data<float>());
  if (found) found_inf.data<float>()[0] = 1.f;
}

// The same float arithmetic as the CUDA kernel (kernels/cuda/optim.cu's update_scale_kernel).
void update_scale(LossScaleState& state, const Tensor& found_inf, const LossScaleRule& rule) {
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

}  // namespace cg::ops::detail::cpu
