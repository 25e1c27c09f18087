// Multi-tensor optimizer updates and mixed-precision gradient handling: one launch covers a whole
// list of tensors (their pointers travel in the kernel's parameter block, chunked when the list is
// long), so a step over MiniResNet's 47 parameters costs a handful of launches, not 47.
// Semantics per tensor are kernels/cpu/optim.h's and kernels/cpu/amp.h's. Every update takes
// `found_inf`, a device float (or null): when it is non-zero the kernels leave everything
// untouched, so a step with overflowed gradients is skipped without the host ever reading it.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/types.h"
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

// One float32 tensor's slot in a multi-tensor launch; unused pointers may be null.
struct TensorSlot {
  int64_t n = 0;
  float* param = nullptr;
  const float* grad = nullptr;
  float* state1 = nullptr;  // SGD: momentum buffer; AdamW: exp_avg
  float* state2 = nullptr;  // AdamW: exp_avg_sq
};

// device_lr (may be null): a device float32 read as the learning rate instead of h.lr, so that a
// replayed CUDA graph follows the schedule (its launch arguments are frozen at capture).
// first_step: the momentum buffers are initialized with the gradient (PyTorch's first step).
void sgd_update_multi(const std::vector<TensorSlot>& tensors, const SgdOptions& h, bool first_step,
                      const float* found_inf, Stream stream, const float* device_lr = nullptr);
// step: device int64 holding the 1-based step of this update (see advance_step); the bias
// corrections are computed from it on the device in double precision.
void adamw_update_multi(const std::vector<TensorSlot>& tensors, const AdamWOptions& h, const int64_t* step,
                        const float* found_inf, Stream stream, const float* device_lr = nullptr);
// *step += 1 unless *found_inf (found_inf may be null).
void advance_step(int64_t* step, const float* found_inf, Stream stream);

// Mixed precision. For every tensor, grad *= *inv_scale, and *found_inf is set to 1 when any
// result is inf or NaN (it is only ever set, never cleared: zero it before the first call).
// Uses TensorSlot::param as the gradient to unscale in place.
void unscale_and_check_multi(const std::vector<TensorSlot>& grads, const float* inv_scale, float* found_inf,
                             Stream stream);
// GradScaler's update rule on the device: on overflow scale *= backoff and tracker = 0; else
// tracker += 1 and, when it reaches growth_interval, scale *= growth and tracker = 0. Also
// writes inv_scale = 1 / scale.
void update_loss_scale(float* scale, float* inv_scale, int64_t* growth_tracker, const float* found_inf,
                       float growth_factor, float backoff_factor, int64_t growth_interval, Stream stream);

}  // namespace cg::kernels::cuda
