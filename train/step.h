// TrainStep: one micro-batch of training, the one object the trainer and cudagrad-bench call,
// whatever the mode. Eagerly, its phases in a row: forward (under autocast when amp.enabled, and
// under DDP's no_sync() unless the micro-batch ends its accumulation group), backward (the loss
// divided over the accumulation group and multiplied by the fp16 loss scale), the wait for DDP's
// all-reduces and, when the group ends, the optimizer step (through the GradScaler with fp16:
// unscale, overflow check agreed by all ranks, skip on the device). With train.cuda_graph the
// same whole step is captured once and replayed (train/step_graph.h); the caller sees no
// difference. Nothing here waits for the GPU.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "data/device_feeder.h"
#include "dist/ddp.h"
#include "nn/grad_scaler.h"
#include "engine/execution.h"
#include "nn/module.h"
#include "nn/optimizer.h"
#include "train/step_graph.h"
#include "train/train_config.h"

namespace cg::train {

// Where a micro-batch falls in training.
struct MicroStep {
  double lr = 0;            // the learning rate of the optimizer step this micro-batch belongs to
  // Ends the accumulation group here, however short it is (the epoch's last batch); otherwise it
  // ends after train.grad_accum_steps micro-batches.
  bool close_group = false;
};

// What a micro-step gives back: the batch's detached loss and hits (StepOutputs), and whether it
// ended its accumulation group, so that the optimizer stepped.
struct MicroStepOutputs : StepOutputs {
  bool optimizer_stepped = false;
};

// How a micro-batch's forward treats DDP's gradient synchronization.
struct ForwardOptions {
  // Whether the backward of this micro-batch ends an accumulation group (DDP communicates);
  // otherwise the forward runs under DDP's no_sync().
  bool sync = true;
};

// Whether TrainStep captures its step as a CUDA graph, and, where train.cuda_graph=auto does not,
// why not (empty when there is nothing to say: false, or the CPU). `comm`: DDP's transport ("" without
// DDP). Throws UsageError for train.cuda_graph=true with a transport a graph cannot hold.
struct GraphDecision {
  bool capture = false;
  std::string why_not;
};
GraphDecision decide_cuda_graph(const TrainConfig& c, bool on_gpu, std::string_view comm);

class TrainStep {
 public:
  // ddp may be null (one process). The model and optimizer are on compute's device already;
  // compute is this thread's current stream. With train.cuda_graph, fails (UsageError) when DDP
  // runs over Gloo, whose host code a graph cannot hold.
  TrainStep(const TrainConfig& c, nn::Module& model, nn::Optimizer& optimizer, dist::DistributedDataParallel* ddp,
            const Stream& compute);

  // One micro-batch: train.grad_accum_steps of them (or fewer, at the end of an epoch) make an
  // optimizer step. Replayed from a CUDA graph with train.cuda_graph (one micro-batch a step).
  MicroStepOutputs run_micro_step(const data::DeviceBatch& batch, MicroStep where);

  // The eager phases one at a time, for a test that steps in between (an injected overflow).
  // forward returns the float32 mean loss on the device; *hits (when not null) the
  // correct-prediction count.
  Tensor forward(const data::DeviceBatch& batch, ForwardOptions options, Tensor* hits);
  void backward(const Tensor& loss);
  void wait_for_gradients();       // DDP's wait for the gradients' collectives
  void optimizer_step(double lr);  // and zero the gradients

  // Called at the end of each eager phase (forward, backward, the wait, the optimizer) and after
  // each replay, never inside a capture: where cudagrad-bench marks its clock.
  void on_phase_end(std::function<void()> hook) { phase_end_ = std::move(hook); }

  nn::GradScaler* scaler() { return scaler_.get(); }
  const StepGraph* graph() const { return graph_.get(); }  // null unless train.cuda_graph

 private:
  StepOutputs run_phases(const data::DeviceBatch& batch, bool ends_group, double lr);
  void phase_ended() const;

  nn::Module& model_;
  nn::Optimizer& optimizer_;
  dist::DistributedDataParallel* ddp_;
  ops::ExecutionContext context_;  // the forward's (train/builders.h)
  int64_t accum_;
  int64_t micro_ = 0;  // micro-batches of the current accumulation group so far
  std::unique_ptr<nn::GradScaler> scaler_;  // fp16 only: bf16 has float32's range
  std::unique_ptr<StepGraph> graph_;
  std::function<void()> phase_end_;
};

}  // namespace cg::train
