// The GPU's optimizer updates and loss scaling (engine/ops/optim_devices.h over
// kernels/cuda/optim.h): one multi-tensor launch per list on the current stream; found_inf, the
// learning rate and AdamW's step are read on the device, so the host never waits.
#include "engine/dispatch.h"
#include "engine/ops/optim_devices.h"
#include "kernels/cuda/optim.h"

namespace cg::ops::detail::cuda {
namespace {

namespace cu = kernels::cuda;

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

std::vector<cu::TensorSlot> slots_of(const std::vector<UpdateSlot>& slots) {
  std::vector<cu::TensorSlot> out;
  out.reserve(slots.size());
  for (const UpdateSlot& s : slots)
    out.push_back({s.param.numel(), s.param.data<float>(), s.grad.data<float>(), f32_or_null(s.state1),
                   f32_or_null(s.state2)});
  return out;
}

}  // namespace

void sgd(const std::vector<UpdateSlot>& slots, const SgdOptions& h, bool first_step, const UpdateScalars& scalars) {
  const SgdOptions k{h.lr, h.momentum, h.weight_decay, h.dampening, h.nesterov};
  cu::sgd_update_multi(slots_of(slots), k, first_step, f32_or_null(scalars.found_inf), stream_of(slots.front().param),
                       f32_or_null(scalars.lr));
}

void adamw(const std::vector<UpdateSlot>& slots, const AdamWOptions& h, const AdamWStep& step,
           const UpdateScalars& scalars) {
  const Device device = slots.front().param.device();
  CG_CHECK(step.device.defined() && step.device.device() == device && step.device.dtype() == DType::i64,
           "adamw update on {}: the step must be an int64 scalar on that device (got {})", device.str(),
           step.device.defined() ? step.device.str() : std::string("a host step"));
  const AdamWOptions k{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay};
  cu::adamw_update_multi(slots_of(slots), k, step.device.data<int64_t>(), f32_or_null(scalars.found_inf),
                         stream_of(slots.front().param), f32_or_null(scalars.lr));
}

void advance_step(Tensor& device_step, const Tensor& found_inf) {
  cu::advance_step(device_step.data<int64_t>(), f32_or_null(found_inf), stream_of(device_step));
}

void unscale(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf) {
  std::vector<cu::TensorSlot> slots;
  slots.reserve(grads.size());
  for (const Tensor& g : grads) slots.push_back({g.numel(), g.data<float>(), nullptr, nullptr, nullptr});
  cu::unscale_and_check_multi(slots, inv_scale.data<float>(), found_inf.data<float>(), stream_of(found_inf));
}

void update_scale(LossScaleState& s, const Tensor& found_inf, const LossScaleRule& rule) {
  cu::update_loss_scale(s.scale.data<float>(), s.inv_scale.data<float>(), s.growth_tracker.data<int64_t>(),
                        found_inf.data<float>(), rule.growth_factor, rule.backoff_factor, rule.growth_interval,
                        stream_of(s.scale));
}

}  // namespace cg::ops::detail::cuda
