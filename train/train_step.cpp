#include "train/train_step.h"

#include "dist/overflow_agreement.h"
#include "engine/autocast.h"
#include "engine/ops.h"
#include "util/nvtx.h"
#include "util/trace.h"

namespace cg::train {

TrainStep::TrainStep(const TrainConfig& c, nn::Module& model, nn::Optimizer& optimizer,
                     dist::DistributedDataParallel* ddp, Device device)
    : model_(model), optimizer_(optimizer), ddp_(ddp), params_(model.named_parameters()),
      amp_(c.amp.enabled), amp_dtype_(c.amp.dtype == AmpDtype::bf16 ? DType::bf16 : DType::f16),
      accum_(c.train.grad_accum_steps) {
  if (amp_ && amp_dtype_ == DType::f16) scaler_ = std::make_unique<nn::GradScaler>(nn::GradScalerOptions{}, device);
  if (ddp_ && scaler_) dist::agree_on_overflow(*scaler_, ddp_->comm());  // every rank skips an overflow together
}

Tensor TrainStep::forward(const data::DeviceBatch& batch, ForwardOptions options, Tensor* hits) {
  trace::Span span("forward", "compute");
  CG_NVTX_RANGE("forward");
  autocast::Scope autocast({.enabled = amp_, .dtype = amp_dtype_});
  if (!ddp_) return ops::cross_entropy(model_(batch.images), batch.labels, hits);
  std::optional<dist::DistributedDataParallel::NoSync> accumulate_only;
  if (!options.sync) accumulate_only.emplace(ddp_->no_sync());
  return ops::cross_entropy((*ddp_)(batch.images), batch.labels, hits);
}

void TrainStep::backward(const Tensor& loss) {
  trace::Span span("backward", "compute");
  CG_NVTX_RANGE("backward");
  const Tensor l = accum_ > 1 ? ops::scale(loss, 1.0 / double(accum_)) : loss;
  if (scaler_) scaler_->backward(l);
  else l.backward();
}

void TrainStep::wait_for_gradients() {
  if (!ddp_) return;
  trace::Span span("wait for all-reduces", "compute");
  CG_NVTX_RANGE("wait for all-reduces");
  ddp_->reducer().wait_for_gradients();
}

Tensor TrainStep::run(const data::DeviceBatch& batch, double lr, Tensor* hits) {
  const Tensor loss = forward(batch, {.sync = true}, hits);
  backward(loss);
  wait_for_gradients();
  optimizer_step(lr);
  return loss.detach();  // the autograd graph (and what it saved) goes now, not with the loss
}

void TrainStep::optimizer_step(double lr) {
  {
    trace::Span span("optimizer", "compute");
    CG_NVTX_RANGE("optimizer");
    if (scaler_) {
      scaler_->step(optimizer_, params_, lr);  // agreed over the ranks (dist::agree_on_overflow)
    } else {
      optimizer_.step(lr);
    }
  }
  if (ddp_) ddp_->reducer().start_parameter_gather();  // ZeRO-1: the shards each rank updated, to all
  if (ddp_) ddp_->reducer().zero_grad();  // gradients stay views of DDP's flat buffer
  else optimizer_.zero_grad();
}

}  // namespace cg::train
