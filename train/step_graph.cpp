#include "train/step_graph.h"

#include "util/check.h"
#include "util/nvtx.h"

namespace cg::train {

StepGraph::StepGraph(StepFn run_step, nn::Optimizer& optimizer, const dist::GradientComm* comm, const Stream& compute)
    : run_step_(std::move(run_step)), optimizer_(optimizer), comm_(comm), compute_(compute) {
  CG_CHECK(compute.device().is_cuda() && compute.handle() != nullptr,
           "train.cuda_graph=true needs the step on a created CUDA stream (train.device=cuda), not {}",
           compute.device().str());
}

StepOutputs StepGraph::run(const data::DeviceBatch& batch, double lr) {
  CG_CHECK(current_stream(compute_.device()) == compute_, "StepGraph: the compute stream is not current");
  if (eager_steps_ < kEagerSteps) return run_eagerly(batch, lr);
  if (!graph_->captured()) {
    capture(batch, lr);  // records the step on this batch without running it: the replay below does
  } else {
    CG_CHECK(batch.images.shape() == inputs_.images.shape() && batch.images.dtype() == inputs_.images.dtype() &&
                 batch.labels.shape() == inputs_.labels.shape(),
             "train.cuda_graph: batch {} / {} differs from the captured {} / {}; a graph replays fixed shapes "
             "(data loaders drop the last partial batch)",
             batch.images.str(), batch.labels.str(), inputs_.images.str(), inputs_.labels.str());
    inputs_.images.copy_(batch.images);
    inputs_.labels.copy_(batch.labels);
  }
  optimizer_.set_device_lr(lr);
  if (comm_) comm_->check_health();  // before the captured collectives run again (gradient_comm.h)
  {
    CG_NVTX_RANGE("graph replay");
    graph_->replay();
  }
  ++replays_;
  if (comm_) comm_->watch_replay(compute_, fmt::format("training step, replay {}", replays_));
  optimizer_.set_steps_taken(optimizer_.steps_taken() + 1);
  return {outputs_.loss.clone(), outputs_.hits.clone()};  // the next replay overwrites outputs_
}

StepOutputs StepGraph::run_eagerly(const data::DeviceBatch& batch, double lr) {
  if (++eager_steps_ < kEagerSteps) return run_step_(batch, lr);
  // The last eager step allocates from the graph's pool, so that the capture which follows finds
  // its blocks cached there (cuda_graph.h, warm_up); the outputs are copied out of the pool.
  graph_ = std::make_unique<CudaGraph>(compute_);
  StepOutputs out;
  graph_->warm_up([&] { out = run_step_(batch, lr); });
  return {out.loss.clone(), out.hits.clone()};
}

void StepGraph::capture(const data::DeviceBatch& batch, double lr) {
  // Before the capture: the copy of a batch into the inputs, and the write of the learning rate,
  // must happen before every replay with that step's values, not be recorded with this one's.
  inputs_ = {batch.images.clone(), batch.labels.clone(), batch.size};
  optimizer_.set_device_lr(lr);
  const int64_t steps = optimizer_.steps_taken();  // step() counts itself once, during capture
  graph_->capture([&] { outputs_ = run_step_(inputs_, lr); });
  optimizer_.set_steps_taken(steps);
}

PoolStats StepGraph::pool_stats() const { return graph_ ? graph_->pool_stats() : PoolStats{}; }
size_t StepGraph::backend_allocations_in_capture() const {
  return graph_ ? graph_->backend_allocations_in_capture() : 0;
}

}  // namespace cg::train
