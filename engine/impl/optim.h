// The optimizer-update family (SGD and AdamW over a list of parameters, AdamW's step counter)
// and the loss-scaling family (unscale with an inf/NaN check, GradScaler's scale update): their
// interfaces and registries. Built in for each: the CPU reference (one kernel call per tensor;
// the device scalars are read on the host) and the CUDA multi-tensor kernels (one launch per
// list, the scalars read on the device). There is no kernels.* key for either family: each
// device's only implementation is picked, and anything but float32 is refused.
#pragma once
#include <string>
#include <vector>

#include "engine/impl/registry.h"
#include "engine/optim_ops.h"

namespace cg::impl {

// What an update or an unscale runs on: the parameters' (or gradients') device and dtype.
struct OptimProblem {
  Device device;
  DType dtype = DType::f32;
};

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

class OptimizerImpl {
 public:
  virtual ~OptimizerImpl() = default;
  virtual std::string why_unsupported(const OptimProblem& p) const = 0;
  // Updates every slot (param, grad, state1 = momentum buffer, undefined when momentum is 0);
  // first_step: the buffers take the gradient (PyTorch's first step).
  virtual void sgd(const OptimProblem& p, const std::vector<ops::UpdateSlot>& slots, const ops::SgdHyper& h,
                   bool first_step, const UpdateScalars& scalars) const = 0;
  // Updates every slot (param, grad, state1 = exp_avg, state2 = exp_avg_sq).
  virtual void adamw(const OptimProblem& p, const std::vector<ops::UpdateSlot>& slots, const ops::AdamWHyper& h,
                     const AdamWStep& step, const UpdateScalars& scalars) const = 0;
  // device_step += 1 unless found_inf (may be undefined) is non-zero.
  virtual void advance_step(const OptimProblem& p, Tensor& device_step, const Tensor& found_inf) const = 0;
};

// GradScaler's state as tensors on one device: scale and inv_scale float32, growth_tracker int64.
struct LossScaleState {
  Tensor scale, inv_scale, growth_tracker;
};
struct LossScaleRule {
  float growth_factor = 2.f, backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};

class LossScaleImpl {
 public:
  virtual ~LossScaleImpl() = default;
  virtual std::string why_unsupported(const OptimProblem& p) const = 0;
  // Every grad *= inv_scale in place; found_inf is set to 1 when any result is inf or NaN (only
  // ever set: the caller zeroes it first).
  virtual void unscale(const OptimProblem& p, const std::vector<Tensor>& grads, const Tensor& inv_scale,
                       Tensor& found_inf) const = 0;
  // On overflow scale *= backoff and tracker = 0; else tracker += 1 and at growth_interval
  // scale *= growth (unless that overflows) and tracker = 0; then inv_scale = 1 / scale.
  virtual void update_scale(const OptimProblem& p, LossScaleState& state, const Tensor& found_inf,
                            const LossScaleRule& rule) const = 0;
};

using OptimizerRegistry = Registry<OptimizerImpl>;
using LossScaleRegistry = Registry<LossScaleImpl>;
OptimizerRegistry& optimizer_registry();
LossScaleRegistry& loss_scale_registry();

void register_optimizer_cpu(OptimizerRegistry& r);
void register_optimizer_cuda(OptimizerRegistry& r);
void register_loss_scale_cpu(LossScaleRegistry& r);
void register_loss_scale_cuda(LossScaleRegistry& r);

}  // namespace cg::impl
