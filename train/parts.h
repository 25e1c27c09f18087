// TrainingParts: what a training run is made of, built once, in one constructor, for
// cudagrad-train, cudagrad-bench and the step's tests: the device and its compute stream (current
// on this thread while the parts live), the model, its optimizer, the checkpoint resumed from (its
// weights and optimizer state loaded, the generator's state restored), the data-parallel wrapper
// (DDP, sharded and with SyncBatchNorm as configured) and the step (train/step.h: eager, or replayed
// as a CUDA graph with train.cuda_graph). Which checkpoint to resume from is decided before any of
// it (train/resume_point.h), so the checkpoint loads before DDP broadcasts rank 0's weights and
// before the step's graph takes the tensors' addresses, and nothing is ever half-built: every part
// is there from construction to destruction, none is replaced. What the trainer adds on top is
// data, the schedule, evaluation and checkpoints (train/trainer.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "dist/ddp.h"
#include "dist/sync_batch_norm.h"
#include "engine/random.h"
#include "engine/stream.h"
#include "nn/checkpoint.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "train/distributed.h"
#include "train/step.h"
#include "train/train_config.h"

namespace cg::train {

class TrainingParts {
 public:
  // `dist`: this process's place among the ranks (it outlives the parts). `resume_from`: the
  // checkpoint every rank agreed to resume from, "" to start afresh.
  TrainingParts(const TrainConfig& c, DistContext& dist, const std::string& resume_from = "");
  TrainingParts(const TrainingParts&) = delete;
  TrainingParts& operator=(const TrainingParts&) = delete;

  Device device() const { return device_; }
  const Stream& compute() const { return compute_; }
  Generator& generator() { return gen_; }
  nn::MiniResNet& model() { return model_; }
  nn::Optimizer& optimizer() { return *optimizer_; }
  // Null with one process (and no modeled backend): nothing to communicate.
  dist::DistributedDataParallel* ddp() { return ddp_.get(); }
  TrainStep& step() { return *step_; }
  // Where the resumed checkpoint left off (its loss scale already in the step's scaler); nullopt
  // on a fresh start.
  const std::optional<nn::TrainingProgress>& resumed() const { return resumed_; }
  const std::string& resumed_from() const { return resumed_from_; }  // "" on a fresh start

 private:
  void load_checkpoint(const std::string& from, DistContext& dist);

  TrainConfig c_;
  Device device_;
  Stream compute_;
  StreamGuard on_compute_;
  Generator gen_;
  nn::MiniResNet model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::optional<nn::TrainingProgress> resumed_;
  std::string resumed_from_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
  std::unique_ptr<dist::SyncBatchNorm> sync_batch_norm_;  // after ddp_: its hooks use DDP's transport
  std::unique_ptr<TrainStep> step_;
};

}  // namespace cg::train
