// The run's objects that the config alone describes, each built by one function: the model's
// options, the optimizer, the learning-rate schedule, and DDP over the transport dist.backend asks
// for. The training parts (train/parts.h) and the trainer call them; tests that assemble a step of
// their own do too.
#pragma once
#include <memory>

#include "dist/ddp.h"
#include "dist/sync_batch_norm.h"
#include "engine/execution.h"
#include "nn/lr_schedule.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "train/distributed.h"
#include "train/train_config.h"

namespace cg::train {

nn::MiniResNetOptions model_options(const TrainConfig& c);
// How the model's ops run (model.channels_last, kernels.*, amp.*): the step's forward and
// evaluation run inside a scope of it (engine/execution.h).
ops::ExecutionContext execution_context(const TrainConfig& c);
std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model);

// An optimizer step every grad_accum_steps batches, the epoch's last group possibly shorter.
int64_t optimizer_steps_per_epoch(const TrainConfig& c, int64_t batches_per_epoch);
// The schedule over train.epochs epochs of `batches_per_epoch` batches.
nn::LrSchedule make_schedule(const TrainConfig& c, int64_t batches_per_epoch);

// DDP over the transport dist.backend asks for (train/distributed.h), or null when there is
// nothing to communicate (one process, dist.backend not modeled).
std::unique_ptr<dist::DistributedDataParallel> make_ddp(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                        Device device);
// model.sync_batchnorm: every BatchNorm2d's statistics over the ranks, through DDP's transport
// (dist/sync_batch_norm.h); null without it, without DDP, or with one process.
std::unique_ptr<dist::SyncBatchNorm> make_sync_batch_norm(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                         dist::DistributedDataParallel* ddp);

}  // namespace cg::train
