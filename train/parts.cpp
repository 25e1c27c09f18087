#include "train/parts.h"

#include "train/builders.h"
#include "train/checkpoint_files.h"
#include "train/device_setup.h"
#include "util/log.h"

namespace cg::train {
namespace {

// Ranks on one machine share its cores; then the device, as train.device says.
Device prepare_device(const TrainConfig& c, const DistContext& dc) {
  set_compute_threads(c, dc.world_size());
  return choose_device(c, dc.identity().local_rank);
}

}  // namespace

TrainingParts::TrainingParts(const TrainConfig& c, DistContext& dist, const std::string& resume_from)
    : c_(c),
      device_(prepare_device(c, dist)),
      // Every op of this thread runs on one compute stream (non-blocking: it overlaps the loader's
      // copy stream and the communication stream, ordered by events only).
      compute_(device_.is_cuda() ? Stream::create(device_) : Stream()),
      on_compute_(compute_),
      gen_(uint64_t(c.train.seed)),
      model_(model_options(c), gen_) {
  if (c.train.cuda_graph == CudaGraphMode::on && !device_.is_cuda())
    throw UsageError("train.cuda_graph=true needs a GPU, and train.device=auto found none; set it false");
  int64_t n_params = 0;
  for (auto& [name, t] : model_.named_parameters()) n_params += t.numel();
  log::info("model: MiniResNet widths {} blocks {}, {} parameters", shape_str(c.model.widths),
            shape_str(c.model.blocks), n_params);
  if (!c.model.init_from.empty()) {
    nn::load_model_weights(c.model.init_from, model_);
    log::info("model: weights from {}", c.model.init_from);
  }
  model_.to(device_);
  optimizer_ = make_optimizer(c, model_);
  if (!resume_from.empty()) load_checkpoint(resume_from, dist);
  // After loading: DDP broadcasts rank 0's weights, and a CUDA graph (train.cuda_graph) will
  // capture the loaded tensors' addresses.
  ddp_ = make_ddp(c_, dist, model_, device_);
  sync_batch_norm_ = make_sync_batch_norm(c_, dist, model_, ddp_.get());
  if (ddp_) ddp_->reducer().attach(*optimizer_);  // sharded: cut to this rank's slices
  else if (c_.dist.sharding != dist::Sharding::no_shard)
    log::info("dist.sharding={}: one process, nothing to shard", enum_name(c_.dist.sharding));
  step_ = std::make_unique<TrainStep>(c_, model_, *optimizer_, ddp_.get(), compute_);
  if (step_->scaler() && resumed_ && resumed_->loss_scale > 0)
    step_->scaler()->load(resumed_->loss_scale, resumed_->loss_scale_growth_tracker);
}

// The weights, the optimizer's state and the generator's; every rank loaded the same bytes
// (train/resume_point.h), so the same state must have come out of them.
void TrainingParts::load_checkpoint(const std::string& from, DistContext& dist) {
  resumed_ = nn::load_checkpoint(from, model_, *optimizer_);  // also refuses another optimizer's
  resumed_from_ = from;
  dist.check_replicas_equal(state_fingerprint(model_, *optimizer_), "resumed weights and optimizer state");
  if (!resumed_->rng_state.empty()) gen_.set_state(resumed_->rng_state);
  log::info("resumed from {}: epoch {}, batch {}, step {}", from, resumed_->epoch + 1, resumed_->batch_in_epoch,
            resumed_->step);
}

}  // namespace cg::train
