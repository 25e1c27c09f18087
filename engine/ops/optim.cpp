// engine/optim_ops.h over the CPU kernels (kernels/cpu/optim.h, amp.h) and the multi-tensor
// CUDA kernels (kernels/cuda/optim.h).
#include "engine/optim_ops.h"

#include "engine/stream.h"
#include "kernels/cpu/amp.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"

namespace cg::ops {
namespace {

namespace cu = kernels::cuda;

kernels::SgdParams params_of(const SgdHyper& h) { return {h.lr, h.momentum, h.weight_decay, h.dampening, h.nesterov}; }
kernels::AdamWParams params_of(const AdamWHyper& h) { return {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay}; }

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

std::vector<cu::TensorSlot> slots_of(const std::vector<UpdateSlot>& slots) {
  std::vector<cu::TensorSlot> out;
  out.reserve(slots.size());
  for (const UpdateSlot& s : slots)
    out.push_back({s.param.numel(), s.param.data<float>(), s.grad.data<float>(), f32_or_null(s.state1),
                   f32_or_null(s.state2)});
  return out;
}

cu::Stream stream_for(const std::vector<UpdateSlot>& slots) {
  CG_CHECK(!slots.empty() && slots.front().param.device().is_cuda(), "multi-tensor update: needs CUDA parameters");
  return current_stream(slots.front().param.device()).handle();
}

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h, bool first_step) {
  kernels::cpu::sgd_update(param.numel(), params_of(h), first_step, param.data<float>(), grad.data<float>(),
                           f32_or_null(momentum_buffer));
}

void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
                  const AdamWHyper& h) {
  kernels::cpu::adamw_update(param.numel(), params_of(h), step, param.data<float>(), grad.data<float>(),
                             exp_avg.data<float>(), exp_avg_sq.data<float>());
}

void sgd_update_multi(const std::vector<UpdateSlot>& slots, const SgdHyper& h, bool first_step, const Tensor& found_inf,
                      const Tensor& device_lr) {
  if (slots.empty()) return;
  cu::sgd_update_multi(slots_of(slots), params_of(h), first_step, f32_or_null(found_inf), stream_for(slots),
                       f32_or_null(device_lr));
}

void adamw_update_multi(const std::vector<UpdateSlot>& slots, const AdamWHyper& h, const Tensor& device_step,
                        const Tensor& found_inf, const Tensor& device_lr) {
  if (slots.empty()) return;
  cu::adamw_update_multi(slots_of(slots), params_of(h), device_step.data<int64_t>(), f32_or_null(found_inf),
                         stream_for(slots), f32_or_null(device_lr));
}

void advance_step(Tensor& device_step, const Tensor& found_inf) {
  cu::advance_step(device_step.data<int64_t>(), f32_or_null(found_inf), current_stream(device_step.device()).handle());
}

bool unscale_and_check(Tensor& grad, float inv_scale) {
  return kernels::cpu::unscale_and_check(grad.numel(), inv_scale, grad.data<float>());
}

void unscale_and_check_multi(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf) {
  if (grads.empty()) return;
  std::vector<cu::TensorSlot> slots;
  for (const Tensor& g : grads) slots.push_back({g.numel(), g.data<float>(), nullptr, nullptr, nullptr});
  cu::unscale_and_check_multi(slots, inv_scale.data<float>(), found_inf.data<float>(),
                              current_stream(found_inf.device()).handle());
}

void update_loss_scale(Tensor& scale, Tensor& inv_scale, Tensor& growth_tracker, const Tensor& found_inf,
                       float growth_factor, float backoff_factor, int64_t growth_interval) {
  cu::update_loss_scale(scale.data<float>(), inv_scale.data<float>(), growth_tracker.data<int64_t>(),
                        found_inf.data<float>(), growth_factor, backoff_factor, growth_interval,
                        current_stream(scale.device()).handle());
}

}  // namespace cg::ops
