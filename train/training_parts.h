// The pieces the training loop (trainer.cpp) is assembled from, each a plain function: datasets,
// optimizer and schedule built from the config, batches as tensors, the sharded evaluation, and
// checkpoint bookkeeping for restarts and replica checks.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "train/distributed.h"
#include "train/train_config.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "dist/ddp.h"
#include "dist/sync_batchnorm.h"
#include "nn/lr_schedule.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"

namespace cg::train {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t);

using Split = data::Split;
// One split of the configured dataset (the synthetic test split is a fifth of the training one).
std::unique_ptr<data::Dataset> make_split(const TrainConfig& c, Split split);
nn::MiniResNetOptions model_options(const TrainConfig& c);
std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model);
// OpenMP threads for CPU compute: train.threads, or this machine's cores shared by the ranks on it.
void set_compute_threads(const TrainConfig& c, int world_size);
// Where to train: the GPU local_rank % visible GPUs (made current) when train.device is cuda, or
// auto and a GPU is visible; else the CPU. Applies the config's GPU kernel choices; fails clearly
// for a GPU-only setting without a GPU. Logs what is used.
Device choose_device(const TrainConfig& c, int local_rank);

// DDP over the transport dist.backend asks for (train/distributed.h), or null when there is
// nothing to communicate (one process, dist.backend not modeled).
std::unique_ptr<dist::DistributedDataParallel> make_ddp(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                        Device device);
// model.sync_batchnorm: every BatchNorm2d's statistics over the ranks, through DDP's transport
// (dist/sync_batchnorm.h); null without it, without DDP, or with one process.
std::unique_ptr<dist::SyncBatchNorm> make_sync_batchnorm(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                         dist::DistributedDataParallel* ddp);

struct EvalResult {
  double loss = 0, accuracy = 0, images_per_s = 0;
  int64_t images = 0;  // evaluated over all ranks: the test set's size
};
// Each rank evaluates its shard of the test set in eval mode (on a GPU under the same autocast as
// training); the sums are added over ranks. The shards are not padded (unlike training's), so
// every test image counts once, whatever the number of ranks.
EvalResult evaluate(nn::MiniResNet& model, const data::Dataset& test_set, const TrainConfig& c, DistContext& dc,
                    Device device);

// cudagrad-launch --max-restarts sets CUDAGRAD_RESTART=n for the n-th restart of the group.
bool restarted_by_launcher();
// The newest checkpoint in dir ("" when there is none): where a restarted group resumes.
std::string latest_checkpoint(const std::filesystem::path& dir);
// CRC-32 of every state-dict tensor's bytes: equal weights, equal fingerprints.
uint32_t state_fingerprint(const nn::Module& model);

}  // namespace cg::train
