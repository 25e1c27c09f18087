// Dynamic loss scaling for fp16 training, with torch.amp.GradScaler's defaults and rules: the
// loss is multiplied by `scale` before backward; before the optimizer step the gradients are
// divided by it and checked for inf/NaN. A step with an overflow is skipped and the scale halves;
// after `growth_interval` clean steps in a row the scale doubles.
// The state (scale, 1/scale, growth tracker, found_inf) lives on the scaler's device. On a GPU
// every decision is made there: one multi-tensor launch unscales and checks all gradients, the
// optimizer kernels skip themselves when found_inf is set, and the scale is updated by a kernel,
// so a step never waits for the host. With data parallelism every rank must take the same
// decision: the caller's `agree` reduces found_inf across ranks in place (a sum all-reduce).
#pragma once
#include <cstdint>
#include <functional>

#include "nn/optimizer.h"

namespace cg::nn {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// Receives found_inf (one float32 element on the scaler's device, non-zero = overflow on this
// rank) and must leave in it the decision of all ranks. Alone: nothing to do.
using AgreeOnOverflow = std::function<void(Tensor& found_inf)>;

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {}, Device device = Device::cpu());

  // Reading these on a GPU waits for the device: for logs and checkpoints, not every step.
  double scale() const { return scale_.item(); }
  int64_t growth_tracker() const { return int64_t(growth_tracker_.item()); }
  bool last_step_skipped() const { return found_inf_.item() != 0; }

  // backward() of loss * scale, the multiplication applied to the seed gradient (on the device).
  void backward(const Tensor& loss) const;
  // Unscale the gradients the optimizer is about to use (Optimizer::gradients(): this rank's
  // shards under sharded data parallelism), agree, step the optimizer unless there was an
  // overflow, update the scale. Returns
  // whether the step was taken on the CPU; on a GPU it returns true without knowing (see
  // last_step_skipped()).
  // `agree`, when given, replaces the agreement installed with set_overflow_agreement for this step.
  bool step(Optimizer& optimizer, double lr, const AgreeOnOverflow& agree = {});
  // How every later step agrees with the other ranks (dist::agree_on_overflow installs it).
  void set_overflow_agreement(AgreeOnOverflow agree) { agree_ = std::move(agree); }
  // The scale rule alone, for a decision made elsewhere (tests, the CPU path).
  void update(bool found_inf);
  // For checkpoints.
  void load(double scale, int64_t growth_tracker);

 private:
  void unscale(const NamedTensors& grads);  // sets found_inf_

  GradScalerOptions options_;
  Device device_;
  Tensor scale_, inv_scale_, found_inf_;  // float32 []
  Tensor growth_tracker_;                 // int64 []
  AgreeOnOverflow agree_;                 // none: this process decides alone
};

}  // namespace cg::nn
