#include "nn/grad_scaler.h"

#include <limits>

#include "engine/autograd/grad_mode.h"
#include "engine/optim_ops.h"

namespace cg::nn {

GradScaler::GradScaler(const GradScalerOptions& o, Device device) : options_(o), device_(device) {
  CG_CHECK(o.init_scale > 0 && o.growth_factor > 1 && o.backoff_factor > 0 && o.backoff_factor < 1 &&
               o.growth_interval >= 1,
           "GradScaler: invalid options");
  scale_ = Tensor::full({}, o.init_scale, DType::f32, device);
  inv_scale_ = Tensor::full({}, 1.0 / o.init_scale, DType::f32, device);
  found_inf_ = Tensor::zeros({}, DType::f32, device);
  growth_tracker_ = Tensor::zeros({}, DType::i64, device);
}

void GradScaler::backward(const Tensor& loss) const {
  CG_CHECK(loss.numel() == 1 && loss.dtype() == DType::f32 && loss.device() == device_,
           "GradScaler::backward: loss {} must be one float32 value on {}", loss.str(), device_.str());
  loss.backward(scale_.view(loss.shape()));
}

void GradScaler::unscale(const NamedTensors& named_grads) {
  std::vector<Tensor> grads;
  for (const auto& [name, g] : named_grads) {
    CG_CHECK(g.device() == device_ && g.dtype() == DType::f32, "GradScaler: gradient of '{}' is {}, expected float32 on {}",
             name, g.str(), device_.str());
    grads.push_back(g);  // unscaled in place
  }
  found_inf_.zero_();
  ops::unscale_and_check_multi(grads, inv_scale_, found_inf_);
}

bool GradScaler::step(Optimizer& optimizer, double lr, const AgreeOnOverflow& given) {
  autograd::NoGradGuard no_grad;
  const AgreeOnOverflow& agree = given ? given : agree_;
  if (device_.is_cuda()) {
    unscale(optimizer.gradients());
    if (agree) agree(found_inf_);
    optimizer.step(lr, found_inf_);
    ops::update_loss_scale(scale_, inv_scale_, growth_tracker_, found_inf_, float(options_.growth_factor),
                           float(options_.backoff_factor), options_.growth_interval);
    return true;
  }
  unscale(optimizer.gradients());
  if (agree) agree(found_inf_);
  const bool found = found_inf_.item() != 0;
  if (!found) optimizer.step(lr);
  update(found);
  return !found;
}

void GradScaler::update(bool found_inf) {
  double scale = this->scale();
  int64_t tracker = growth_tracker();
  if (found_inf) {
    scale *= options_.backoff_factor;
    tracker = 0;
  } else if (++tracker == options_.growth_interval) {
    scale *= options_.growth_factor;
    tracker = 0;
  }
  load(scale, tracker);
}

void GradScaler::load(double scale, int64_t growth_tracker) {
  // The scale lives in float32: a finite double above FLT_MAX would become inf there. A tracker at or
  // past the interval would never again equal it, so the scale could never grow.
  CG_CHECK(scale > 0 && scale <= std::numeric_limits<float>::max() && growth_tracker >= 0 &&
               growth_tracker < options_.growth_interval,
           "GradScaler: saved state out of range: loss scale {} (must be positive and finite in float32), growth "
           "tracker {} (must lie in [0, growth_interval={}))", scale, growth_tracker, options_.growth_interval);
  scale_.fill_(scale);
  inv_scale_.fill_(1.0 / scale);
  growth_tracker_.fill_(double(growth_tracker));
}

}  // namespace cg::nn
