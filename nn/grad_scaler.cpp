#include "nn/grad_scaler.h"

#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "kernels/cpu/amp.h"

namespace cg::nn {

GradScaler::GradScaler(const GradScalerOptions& o) : options_(o), scale_(o.init_scale) {
  CG_CHECK(o.init_scale > 0 && o.growth_factor > 1 && o.backoff_factor > 0 && o.backoff_factor < 1 &&
               o.growth_interval >= 1,
           "GradScaler: invalid options");
}

Tensor GradScaler::scale_loss(const Tensor& loss) const { return ops::scale(loss, scale_); }

bool GradScaler::unscale(const NamedTensors& params) const {
  autograd::NoGradGuard no_grad;
  const float inv = float(1.0 / scale_);
  bool found = false;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    found |= kernels::cpu::unscale_and_check(g.numel(), inv, g.data<float>());
  }
  return found;
}

bool GradScaler::step(Optimizer& optimizer, const NamedTensors& params, double lr,
                      const std::function<bool(bool)>& agree) {
  const bool found_inf = agree(unscale(params));
  if (!found_inf) optimizer.step(lr);
  update(found_inf);
  return !found_inf;
}

void GradScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

void GradScaler::load(double scale, int64_t growth_tracker) {
  CG_CHECK(scale > 0 && growth_tracker >= 0, "GradScaler: invalid saved state");
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

}  // namespace cg::nn
