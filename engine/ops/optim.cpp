// engine/optim_ops.h: each call checks its tensors and runs its device's kernels
// (engine/ops/optim_devices.h: the CPU reference or the CUDA multi-tensor kernels).
#include "engine/optim_ops.h"

#include "engine/dispatch.h"
#include "engine/ops/optim_devices.h"

namespace cg::ops {
namespace {

// Where an update or an unscale runs: the parameters' (or gradients') device; float32 only.
struct OptimProblem {
  Device device;
  DType dtype = DType::f32;
};

// Every defined tensor of an update lives on `device` with the parameters' dtype.
void check_beside(const char* op, const Tensor& t, const Tensor& first) {
  CG_CHECK(!t.defined() || (t.device() == first.device() && t.dtype() == first.dtype()),
           "{}: {} differs from the first parameter {} (one device and dtype per call)", op, t.str(), first.str());
}
void check_scalar(const char* op, const char* what, const Tensor& t, Device device, DType dtype) {
  CG_CHECK(!t.defined() || (t.numel() == 1 && t.device() == device && t.dtype() == dtype),
           "{}: {} must be one {} value on {} (got {})", op, what, dtype_name(dtype), device.str(), t.str());
}

// Refuses anything but float32, naming the op, its dtype and device and `family`.
void check_f32(const char* op, const OptimProblem& p, const char* family) {
  if (p.dtype != DType::f32)
    CG_FAIL("{} ({}): {} on {} runs float32 only", op, dtype_name(p.dtype), family, p.device.str());
}

OptimProblem problem_of(const char* op, const std::vector<UpdateSlot>& slots) {
  const Tensor& first = slots.front().param;
  for (const UpdateSlot& s : slots) {
    CG_CHECK(s.param.defined() && s.grad.defined() && s.grad.numel() == s.param.numel(),
             "{}: a parameter {} without a matching gradient", op, s.param.str());
    for (const Tensor* t : {&s.param, &s.grad, &s.state1, &s.state2}) check_beside(op, *t, first);
  }
  const OptimProblem p{first.device(), first.dtype()};
  check_f32(op, p, "an optimizer update");
  return p;
}

detail::UpdateScalars scalars_of(const char* op, const OptimProblem& p, const Tensor& found_inf,
                                 const Tensor& device_lr) {
  check_scalar(op, "found_inf", found_inf, p.device, DType::f32);
  check_scalar(op, "the device learning rate", device_lr, p.device, DType::f32);
  return {found_inf, device_lr};
}

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdOptions& h, bool first_step) {
  sgd_update_multi({{param, grad, momentum_buffer, Tensor()}}, h, first_step, Tensor(), Tensor());
}

void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
                  const AdamWOptions& h) {
  const std::vector<UpdateSlot> slots{{param, grad, exp_avg, exp_avg_sq}};
  const OptimProblem p = problem_of("adamw_update", slots);
  detail::on_device(
      "adamw_update", p.device, [&] { detail::cpu::adamw(slots, h, {step, Tensor()}, {}); },
      [&] { detail::cuda::adamw(slots, h, {step, Tensor()}, {}); });
}

void sgd_update_multi(const std::vector<UpdateSlot>& slots, const SgdOptions& h, bool first_step, const Tensor& found_inf,
                      const Tensor& device_lr) {
  if (slots.empty()) return;
  const OptimProblem p = problem_of("sgd_update", slots);
  const detail::UpdateScalars scalars = scalars_of("sgd_update", p, found_inf, device_lr);
  detail::on_device(
      "sgd_update", p.device, [&] { detail::cpu::sgd(slots, h, first_step, scalars); },
      [&] { detail::cuda::sgd(slots, h, first_step, scalars); });
}

void adamw_update_multi(const std::vector<UpdateSlot>& slots, const AdamWOptions& h, const Tensor& device_step,
                        const Tensor& found_inf, const Tensor& device_lr) {
  if (slots.empty()) return;
  const OptimProblem p = problem_of("adamw_update", slots);
  check_scalar("adamw_update", "the step", device_step, p.device, DType::i64);
  CG_CHECK(device_step.defined(), "adamw_update: the step counter is undefined");
  const detail::UpdateScalars scalars = scalars_of("adamw_update", p, found_inf, device_lr);
  detail::on_device(
      "adamw_update", p.device, [&] { detail::cpu::adamw(slots, h, {0, device_step}, scalars); },
      [&] { detail::cuda::adamw(slots, h, {0, device_step}, scalars); });
}

void advance_step(Tensor& device_step, const Tensor& found_inf) {
  CG_CHECK(device_step.defined(), "advance_step: the step counter is undefined");
  const Device device = device_step.device();
  check_scalar("advance_step", "the step", device_step, device, DType::i64);
  check_scalar("advance_step", "found_inf", found_inf, device, DType::f32);
  detail::on_device(
      "advance_step", device, [&] { detail::cpu::advance_step(device_step, found_inf); },
      [&] { detail::cuda::advance_step(device_step, found_inf); });
}

bool unscale_and_check(Tensor& grad, float inv_scale) {
  Tensor inv = Tensor::full({}, inv_scale, DType::f32, grad.device());
  Tensor found_inf = Tensor::zeros({}, DType::f32, grad.device());
  unscale_and_check_multi({grad}, inv, found_inf);
  return found_inf.item() != 0;
}

void unscale_and_check_multi(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf) {
  if (grads.empty()) return;
  const OptimProblem p{grads.front().device(), grads.front().dtype()};
  for (const Tensor& g : grads) check_beside("unscale", g, grads.front());
  check_f32("unscale", p, "loss scaling");
  check_scalar("unscale", "inv_scale", inv_scale, p.device, DType::f32);
  check_scalar("unscale", "found_inf", found_inf, p.device, DType::f32);
  CG_CHECK(found_inf.defined() && inv_scale.defined(), "unscale: inv_scale and found_inf are needed");
  detail::on_device(
      "unscale", p.device, [&] { detail::cpu::unscale(grads, inv_scale, found_inf); },
      [&] { detail::cuda::unscale(grads, inv_scale, found_inf); });
}

void update_loss_scale(Tensor& scale, Tensor& inv_scale, Tensor& growth_tracker, const Tensor& found_inf,
                       float growth_factor, float backoff_factor, int64_t growth_interval) {
  CG_CHECK(scale.defined() && inv_scale.defined() && growth_tracker.defined() && found_inf.defined(),
           "update_loss_scale: scale, inv_scale, growth_tracker and found_inf are needed");
  const OptimProblem p{scale.device(), DType::f32};
  check_scalar("update_loss_scale", "scale", scale, p.device, DType::f32);
  check_scalar("update_loss_scale", "inv_scale", inv_scale, p.device, DType::f32);
  check_scalar("update_loss_scale", "growth_tracker", growth_tracker, p.device, DType::i64);
  check_scalar("update_loss_scale", "found_inf", found_inf, p.device, DType::f32);
  detail::LossScaleState state{scale, inv_scale, growth_tracker};
  const detail::LossScaleRule rule{growth_factor, backoff_factor, growth_interval};
  detail::on_device(
      "update_loss_scale", p.device, [&] { detail::cpu::update_scale(state, found_inf, rule); },
      [&] { detail::cuda::update_scale(state, found_inf, rule); });
}

}  // namespace cg::ops
