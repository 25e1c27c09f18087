#include "apps/common/train_step.h"

#include "engine/autocast.h"
#include "engine/ops.h"
#include "util/trace.h"

namespace cg::apps {

TrainStep::TrainStep(const TrainConfig& c, nn::Module& model, nn::Optimizer& optimizer,
                     dist::DistributedDataParallel* ddp, DistContext& dc, Device device)
    : model_(model), optimizer_(optimizer), ddp_(ddp), dc_(dc), params_(model.named_parameters()),
      amp_(c.amp.enabled), amp_dtype_(c.amp.dtype == AmpDtype::bf16 ? DType::bf16 : DType::f16),
      accum_(c.train.grad_accum_steps) {
  if (amp_ && amp_dtype_ == DType::f16) scaler_ = std::make_unique<nn::GradScaler>(nn::GradScalerOptions{}, device);
}

Tensor TrainStep::forward(const DeviceBatch& batch, bool sync, Tensor* hits) {
  if (ddp_) {
    ddp_->set_require_sync(sync);
    ddp_->before_forward();
  }
  trace::Span span("forward", "compute");
  autocast::Scope autocast(amp_, amp_dtype_);
  return ops::cross_entropy(model_(batch.images), batch.labels, hits);
}

void TrainStep::backward(const Tensor& loss) {
  trace::Span span("backward", "compute");
  const Tensor l = accum_ > 1 ? ops::scale(loss, 1.0 / double(accum_)) : loss;
  if (scaler_) scaler_->backward(l);
  else l.backward();
}

void TrainStep::finish_gradient_sync() {
  if (!ddp_) return;
  trace::Span span("wait for all-reduces", "compute");
  ddp_->finish_gradient_sync();
}

void TrainStep::optimizer_step(double lr) {
  {
    trace::Span span("optimizer", "compute");
    if (scaler_) {
      // Every rank must skip together: the overflow flags are summed over ranks.
      auto agree = [this](Tensor& found_inf) {
        if (!dc_.distributed()) return;
        std::vector<double> v{found_inf.item()};
        dc_.all_reduce_sum(v);
        found_inf.fill_(v[0]);
      };
      scaler_->step(optimizer_, params_, lr, agree);
    } else {
      optimizer_.step(lr);
    }
  }
  if (ddp_) ddp_->zero_grad();  // gradients stay views of DDP's flat buffer
  else optimizer_.zero_grad();
}

}  // namespace cg::apps
