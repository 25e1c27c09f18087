// train.cuda_graph: a whole optimizer step (forward, backward, DDP's all-reduces over NCCL or the
// modeled backend, the optimizer through the GradScaler) captured once as a CUDA graph and
// replayed, so a step costs one launch instead of hundreds. TrainStep (train/step.h) owns one in
// that mode and hands it its own eager step as `run_step`; nothing else replays. The first
// kEagerSteps steps run eagerly and create everything lazy (optimizer buffers, cuDNN algorithm
// choices and handles, DDP's bucket order, the allocator's blocks), the last of them with its
// allocations already in the graph's pool, so the capture reuses those blocks instead of calling
// cudaMalloc; the next step captures into that private memory pool (engine/cuda_graph.h), on the
// run's own non-default compute stream, which is what PyTorch's side stream is for. Then, per
// step, outside the graph and in the same stream's order: the batch is copied into the captured
// input buffers and the learning rate into the optimizer's device scalar, and the graph is
// replayed. Nothing in it reads the host: the loss scaler decides on the device, AdamW counts its
// steps there, and loss and hits stay device tensors. Anything that replaces a tensor the graph
// uses (loading optimizer state, a DDP bucket rebuild) needs a new StepGraph; the session builds
// the step after loading a checkpoint.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "data/device_feeder.h"
#include "dist/gradient_comm.h"
#include "engine/cuda_graph.h"
#include "nn/optimizer.h"

namespace cg::train {

struct StepOutputs {
  Tensor loss;  // float32 [], the batch's mean loss
  Tensor hits;  // int64 [], correct predictions
};

class StepGraph {
 public:
  static constexpr int64_t kEagerSteps = 3;
  // One whole optimizer step on (batch, lr), run eagerly: what is captured.
  using StepFn = std::function<StepOutputs(const data::DeviceBatch& batch, double lr)>;

  // optimizer: the one `run_step` steps (its device learning rate and step count are set around
  // replays). comm: DDP's transport, watched over each replay (null without DDP). compute: the
  // current stream of this thread, which the step runs on.
  StepGraph(StepFn run_step, nn::Optimizer& optimizer, const dist::GradientComm* comm, const Stream& compute);

  // One optimizer step on `batch` (shaped like the first one) with learning rate `lr`. The
  // outputs are this step's own (copies), so they may be kept while later steps run.
  StepOutputs run(const data::DeviceBatch& batch, double lr);
  bool captured() const { return graph_ && graph_->captured(); }
  int64_t replays() const { return replays_; }
  PoolStats pool_stats() const;
  size_t backend_allocations_in_capture() const;  // cuda_graph.h; 0 is the aim

 private:
  StepOutputs run_eagerly(const data::DeviceBatch& batch, double lr);
  void capture(const data::DeviceBatch& batch, double lr);

  StepFn run_step_;
  nn::Optimizer& optimizer_;
  const dist::GradientComm* comm_;
  Stream compute_;
  int64_t eager_steps_ = 0, replays_ = 0;
  data::DeviceBatch inputs_;  // allocated before the capture; every batch is copied in
  StepOutputs outputs_;       // written by every replay
  std::unique_ptr<CudaGraph> graph_;
};

}  // namespace cg::train
