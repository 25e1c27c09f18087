// Optimizer updates and mixed-precision loss scaling as engine ops, so that nn/ reaches their
// kernels only through the engine. Semantics are torch.optim's (SGD with momentum, dampening,
// nesterov and weight decay added to the gradient; AdamW with decoupled weight decay and
// bias-corrected moments) and torch.cuda.amp.GradScaler's. All tensors float32, all of one call
// on one device. Each call runs its device's kernels (engine/ops/optim_devices.h): on the CPU one
// kernel call per tensor, on the GPU a whole list in one multi-tensor launch on the current stream.
// The "_multi" calls take device scalars: `found_inf` (float32, may be undefined) skips the
// update when non-zero, read where the update runs, so a GPU mixed-precision step never waits
// for the host; device_lr (may be undefined): a float32 scalar read as the learning rate instead
// of the hyperparameters' lr, so that a replayed CUDA graph follows the schedule.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "util/optim_options.h"

namespace cg::ops {

// One parameter of a multi-tensor update and its state (undefined where unused).
struct UpdateSlot {
  Tensor param, grad;
  Tensor state1;  // SGD: momentum buffer; AdamW: exp_avg
  Tensor state2;  // AdamW: exp_avg_sq
};

// One parameter. momentum_buffer may be undefined when momentum == 0; first_step: the
// buffer takes the gradient (PyTorch's first step).
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdOptions& h, bool first_step);
// One parameter; step is 1-based.
void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
                  const AdamWOptions& h);

// Many parameters on one device.
void sgd_update_multi(const std::vector<UpdateSlot>& slots, const SgdOptions& h, bool first_step, const Tensor& found_inf,
                      const Tensor& device_lr);
// device_step: an int64 scalar holding the 1-based step of this update (advance it first).
void adamw_update_multi(const std::vector<UpdateSlot>& slots, const AdamWOptions& h, const Tensor& device_step,
                        const Tensor& found_inf, const Tensor& device_lr);
// device_step += 1 unless found_inf is non-zero.
void advance_step(Tensor& device_step, const Tensor& found_inf);

// Loss scaling. grad *= inv_scale in place; true when any result is inf or NaN (reads the
// result on the host: a GPU caller uses the multi-tensor form).
bool unscale_and_check(Tensor& grad, float inv_scale);
// Every grad *= inv_scale in place; found_inf is set to 1 when any result is inf or NaN
// (only ever set: zero it first).
void unscale_and_check_multi(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf);
// GradScaler's rule where the tensors live, in float32 (on overflow scale *= backoff and tracker = 0; else
// tracker += 1 and at growth_interval scale *= growth, tracker = 0); writes inv_scale = 1/scale.
void update_loss_scale(Tensor& scale, Tensor& inv_scale, Tensor& growth_tracker, const Tensor& found_inf,
                       float growth_factor, float backoff_factor, int64_t growth_interval);

}  // namespace cg::ops
