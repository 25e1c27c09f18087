// Dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's defaults and rules:
// the loss is multiplied by `scale` before backward; before the optimizer step the gradients are
// divided by it and checked for inf/NaN. A step with an overflow is skipped and the scale halves;
// after `growth_interval` clean steps in a row the scale doubles. With data parallelism every
// rank must take the same decision: the caller agrees on found_inf across ranks (any rank).
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

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {});

  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  Tensor scale_loss(const Tensor& loss) const;
  // Unscales every parameter's gradient in place; true when any is inf or NaN.
  bool unscale(const NamedTensors& params) const;
  // Unscale, agree (agree(found_inf) returns the decision of all ranks; identity alone), step the
  // optimizer unless there was an overflow, update the scale. Returns whether the step was taken.
  bool step(Optimizer& optimizer, const NamedTensors& params, double lr,
            const std::function<bool(bool)>& agree = [](bool f) { return f; });
  void update(bool found_inf);
  // For checkpoints.
  void load(double scale, int64_t growth_tracker);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace cg::nn
