// The optimizer updates and loss scaling of engine/optim_ops.h on each device, which
// engine/ops/optim.cpp picks between by on_device: the CPU reference (optim_cpu.cpp: one kernel call per
// tensor; the device scalars read on the host) and the CUDA multi-tensor kernels (optim_cuda.cpp:
// one launch per list, the scalars read on the device). Float32 only; optim.cpp checks the tensors.
// optim_cuda.cpp is compiled only with a CUDA backend (its name says so: see CMakeLists.txt), and
// optim.cpp calls it only through on_device (engine/dispatch.h), whose GPU call such a build discards.
#pragma once
#include <vector>

#include "engine/optim_ops.h"

namespace cg::ops::detail {

// Scalars an update reads where it runs (each may be undefined): found_inf, a float32 that
// skips the whole update when non-zero; lr, a float32 read instead of the hyperparameters' lr.
struct UpdateScalars {
  Tensor found_inf, lr;
};

// AdamW's 1-based step of this update: `device`, an int64 scalar beside the parameters, when
// defined (read where the update runs), else `host`.
struct AdamWStep {
  int64_t host = 0;
  Tensor device;
};

// GradScaler's state as tensors on one device: scale and inv_scale float32, growth_tracker int64.
struct LossScaleState {
  Tensor scale, inv_scale, growth_tracker;
};
struct LossScaleRule {
  float growth_factor = 2.f, backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};

// The same five calls on each device. sgd: every slot (param, grad, state1 = momentum buffer,
// undefined when momentum is 0); first_step: the buffers take the gradient (PyTorch's first
// step). adamw: every slot (param, grad, state1 = exp_avg, state2 = exp_avg_sq). advance_step:
// device_step += 1 unless found_inf (may be undefined) is non-zero. unscale: every grad *=
// inv_scale in place, found_inf set to 1 when a result is inf or NaN (only ever set).
// update_scale: on overflow scale *= backoff and tracker = 0; else tracker += 1 and at
// growth_interval scale *= growth (unless that overflows) and tracker = 0; then inv_scale = 1 / scale.
namespace cpu {
void sgd(const std::vector<UpdateSlot>& slots, const SgdOptions& h, bool first_step, const UpdateScalars& s);
void adamw(const std::vector<UpdateSlot>& slots, const AdamWOptions& h, const AdamWStep& step, const UpdateScalars& s);
void advance_step(Tensor& device_step, const Tensor& found_inf);
void unscale(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf);
void update_scale(LossScaleState& state, const Tensor& found_inf, const LossScaleRule& rule);
}  // namespace cpu

namespace cuda {
void sgd(const std::vector<UpdateSlot>& slots, const SgdOptions& h, bool first_step, const UpdateScalars& s);
void adamw(const std::vector<UpdateSlot>& slots, const AdamWOptions& h, const AdamWStep& step, const UpdateScalars& s);
void advance_step(Tensor& device_step, const Tensor& found_inf);
void unscale(const std::vector<Tensor>& grads, const Tensor& inv_scale, Tensor& found_inf);
void update_scale(LossScaleState& state, const Tensor& found_inf, const LossScaleRule& rule);
}  // namespace cuda

}  // namespace cg::ops::detail
