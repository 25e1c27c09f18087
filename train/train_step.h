// One optimizer step's work, in the phases the trainer runs and the benchmark times separately:
// forward (under autocast when amp.enabled), backward (the loss divided over the accumulation
// group and multiplied by the fp16 loss scale), the wait for DDP's all-reduces, and the optimizer
// step (through the GradScaler with fp16: unscale, overflow check agreed by all ranks, skip on
// the device). Nothing here waits for the GPU.
#pragma once
#include <memory>
#include <optional>

#include "data/device_feeder.h"
#include "train/train_config.h"
#include "dist/ddp.h"
#include "nn/grad_scaler.h"
#include "nn/module.h"
#include "nn/optimizer.h"

namespace cg::train {

// How a micro-batch's forward treats DDP's gradient synchronization.
struct ForwardOptions {
  // Whether the backward of this micro-batch ends an accumulation group (DDP communicates);
  // otherwise the forward runs under DDP's no_sync().
  bool sync = true;
};

class TrainStep {
 public:
  // ddp may be null (one process). The model and optimizer are on `device` already.
  TrainStep(const TrainConfig& c, nn::Module& model, nn::Optimizer& optimizer,
            dist::DistributedDataParallel* ddp, Device device);

  // Returns the float32 mean loss on the device; *hits receives the correct-prediction count.
  Tensor forward(const data::DeviceBatch& batch, ForwardOptions options, Tensor* hits);
  void backward(const Tensor& loss);
  void wait_for_gradients();  // DDP's wait for the gradients' collectives
  void optimizer_step(double lr);  // and zero the gradients
  // The four phases in a row for one batch that ends its accumulation group: what a CUDA graph
  // captures (train/graphed_step.h). Returns the detached loss; *hits as forward's.
  Tensor run(const data::DeviceBatch& batch, double lr, Tensor* hits);

  nn::GradScaler* scaler() { return scaler_.get(); }

 private:
  nn::Module& model_;
  nn::Optimizer& optimizer_;
  dist::DistributedDataParallel* ddp_;
  nn::NamedTensors params_;
  bool amp_;
  DType amp_dtype_;
  int64_t accum_;
  std::unique_ptr<nn::GradScaler> scaler_;  // fp16 only: bf16 has float32's range
};

}  // namespace cg::train
