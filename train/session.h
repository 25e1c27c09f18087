// TrainSession: everything the training step runs on, built from the config in this one place for
// cudagrad-train, cudagrad-bench and the step's tests: this process's distributed context, the
// device and its compute stream (current on this thread while the session lives), the model and
// its optimizer, and, once start() is called, DDP and the step (train/step.h: eager, or replayed
// as a CUDA graph with train.cuda_graph). Built in two stages because a checkpoint loads in
// between: into the model and optimizer of the first, before DDP broadcasts rank 0's weights and
// the step's graph takes the loaded tensors' addresses. What the trainer adds on top is data, the
// schedule, evaluation and checkpoints (train/trainer.h).
#pragma once
#include <memory>

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

class TrainSession {
 public:
  // Joins the other ranks, picks the device (and the CPU threads), makes the compute stream current
  // and builds the model (from model.init_from when set) and the optimizer.
  explicit TrainSession(const TrainConfig& c);
  TrainSession(const TrainSession&) = delete;
  TrainSession& operator=(const TrainSession&) = delete;

  // After any checkpoint was loaded into model and optimizer (`resumed`, or null): DDP broadcasts
  // rank 0's weights, the step is built, its loss scaler takes its saved state, and a CUDA graph
  // (train.cuda_graph) will capture the loaded tensors' addresses.
  void start(const nn::TrainingProgress* resumed);

  DistContext& dist() { return dc_; }
  Device device() const { return device_; }
  const Stream& compute() const { return compute_; }
  Generator& generator() { return gen_; }
  nn::MiniResNet& model() { return model_; }
  nn::Optimizer& optimizer() { return *optimizer_; }
  // After start():
  dist::DistributedDataParallel* ddp() { return ddp_.get(); }
  TrainStep& step() { return *step_; }

 private:
  void shard_optimizer();  // optim.zero_sharding

  TrainConfig c_;
  DistContext dc_;
  Device device_;
  Stream compute_;
  StreamGuard on_compute_;
  Generator gen_;
  nn::MiniResNet model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
  std::unique_ptr<dist::SyncBatchNorm> sync_batch_norm_;  // after ddp_: its hooks use DDP's transport
  std::unique_ptr<TrainStep> step_;
};

}  // namespace cg::train
