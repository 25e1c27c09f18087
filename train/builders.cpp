#include "train/builders.h"

#include "nn/miniresnet.h"

#include "util/log.h"

namespace cg::train {

nn::MiniResNetOptions model_options(const TrainConfig& c) {
  nn::MiniResNetOptions mo;
  mo.in_channels = c.model.in_channels;
  mo.num_classes = c.model.num_classes;
  mo.widths = c.model.widths;
  mo.blocks = c.model.blocks;
  return mo;
}

ops::ExecutionContext execution_context(const TrainConfig& c) {
  return {.layout = c.model.channels_last ? ops::Layout::nhwc : ops::Layout::nchw,
          .kernels = c.kernels,
          .autocast = {.enabled = c.amp.enabled, .dtype = c.amp.dtype == AmpDtype::bf16 ? DType::bf16 : DType::f16}};
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model) {
  if (c.optim.name == OptimizerName::sgd) {
    SgdOptions h;
    h.lr = float(c.optim.lr);
    h.momentum = float(c.optim.momentum);
    h.weight_decay = float(c.optim.weight_decay);
    h.nesterov = c.optim.nesterov;
    return std::make_unique<nn::SGD>(model.named_parameters(), h);
  }
  AdamWOptions h;
  h.lr = float(c.optim.lr);
  h.beta1 = float(c.optim.beta1);
  h.beta2 = float(c.optim.beta2);
  h.eps = float(c.optim.eps);
  h.weight_decay = float(c.optim.weight_decay);
  return std::make_unique<nn::AdamW>(model.named_parameters(), h);
}

int64_t optimizer_steps_per_epoch(const TrainConfig& c, int64_t batches_per_epoch) {
  return (batches_per_epoch + c.train.grad_accum_steps - 1) / c.train.grad_accum_steps;
}

nn::LrSchedule make_schedule(const TrainConfig& c, int64_t batches_per_epoch) {
  nn::ScheduleOptions so;
  so.kind = c.sched.name;
  so.base_lr = c.optim.lr;
  so.min_lr = c.sched.min_lr;
  so.warmup_steps = c.sched.warmup_steps;
  so.steps_per_epoch = optimizer_steps_per_epoch(c, batches_per_epoch);
  so.total_steps = so.steps_per_epoch * c.train.epochs;
  so.epochs = c.train.epochs;
  return nn::LrSchedule(so);
}

std::unique_ptr<dist::DistributedDataParallel> make_ddp(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                        Device device) {
  auto comm = dc.make_gradient_comm(c.dist, device);
  if (!comm) return nullptr;
  dist::DdpOptions options;
  options.bucket_cap_mb = c.dist.bucket_cap_mb;
  options.sharding = c.dist.sharding;
  options.shard_units = [](const std::string&, nn::Module& m) { return nn::is_residual_block(m); };
  options.grad_compression = c.dist.grad_compression;
  options.param_dtype = c.dist.param_dtype;
  if (c.dist.sharding == dist::Sharding::hybrid_shard) {
    const DistContext::HybridComms hybrid = dc.hybrid_comms(c.dist, device);
    options.hybrid_node = hybrid.node;
    options.hybrid_replicas = hybrid.replicas;
  }
  auto ddp = std::make_unique<dist::DistributedDataParallel>(model, std::move(comm), options);
  log::info("DDP (dist.sharding={}) over {}: {}", enum_name(options.sharding), ddp->comm().name(),
            ddp->reducer().describe());
  if (const double modeled = ddp->reducer().modeled_ms_per_step(ddp->comm()); modeled > 0)
    log::info("DDP: the ring model's time for one step's collectives: {:.4f} ms", modeled);
  return ddp;
}

std::unique_ptr<dist::SyncBatchNorm> make_sync_batch_norm(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                         dist::DistributedDataParallel* ddp) {
  if (!c.model.sync_batchnorm || !ddp || dc.world_size() == 1) return nullptr;  // one real rank: nothing to sync
  auto sync = std::make_unique<dist::SyncBatchNorm>(model, ddp->comm());
  log::info("SyncBatchNorm: {} batch-norm layers, statistics over {} ranks", sync->num_layers(), dc.world_size());
  return sync;
}

}  // namespace cg::train
