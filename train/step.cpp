#include "train/step.h"

#include "dist/overflow_agreement.h"
#include "engine/ops.h"
#include "train/builders.h"
#include "util/log.h"
#include "util/nvtx.h"
#include "util/trace.h"

namespace cg::train {

GraphDecision decide_cuda_graph(const TrainConfig& c, bool on_gpu, std::string_view comm) {
  if (c.train.cuda_graph == CudaGraphMode::off || !on_gpu) return {};  // a CPU run needs no word on graphs
  // A transport chosen at run time: dist.backend=auto over ranks that share a GPU stages through Gloo.
  std::string why_not = cuda_graph_refusal(c);
  if (why_not.empty() && comm.find("gloo") != std::string_view::npos)
    why_not = fmt::format("DDP runs over {} (host code; chosen because ranks share a GPU)", comm);
  if (c.train.cuda_graph == CudaGraphMode::automatic) return {why_not.empty(), why_not};
  // true: the config's checks refused what they could see; only the run-time transport is left.
  if (!why_not.empty()) throw UsageError(fmt::format("train.cuda_graph=true cannot capture the step: {}; set it "
                                                     "auto or false", why_not));
  return {true, ""};
}

TrainStep::TrainStep(const TrainConfig& c, nn::Module& model, nn::Optimizer& optimizer,
                     dist::DistributedDataParallel* ddp, const Stream& compute)
    : model_(model), optimizer_(optimizer), ddp_(ddp),
      context_(execution_context(c)), accum_(c.train.grad_accum_steps) {
  if (context_.autocast.enabled && context_.autocast.dtype == DType::f16)
    scaler_ = std::make_unique<nn::GradScaler>(nn::GradScalerOptions{}, compute.device());
  if (ddp_ && scaler_) dist::agree_on_overflow(*scaler_, ddp_->comm());  // every rank skips an overflow together
  const GraphDecision graph = decide_cuda_graph(c, compute.device().is_cuda(), ddp_ ? ddp_->comm().name() : "");
  if (!graph.capture) {
    if (!graph.why_not.empty()) log::info("train: the step runs eagerly (train.cuda_graph=auto: {})", graph.why_not);
    return;
  }
  // What the graph captures and, before that, runs eagerly: a whole step (grad_accum_steps is 1).
  auto whole_step = [this](const data::DeviceBatch& batch, double lr) { return run_phases(batch, true, lr); };
  graph_ = std::make_unique<StepGraph>(whole_step, optimizer_, ddp_ ? &ddp_->comm() : nullptr, compute);
  log::info("train: the step is captured as a CUDA graph after {} eager steps", StepGraph::kEagerSteps);
}

MicroStepOutputs TrainStep::run_micro_step(const data::DeviceBatch& batch, MicroStep where) {
  MicroStepOutputs out;
  if (graph_) {
    static_cast<StepOutputs&>(out) = graph_->run(batch, where.lr);
    if (phase_end_) phase_end_();
    out.optimizer_stepped = true;
    return out;
  }
  // The last micro-batch of an accumulation group communicates and steps; the others only accumulate.
  out.optimizer_stepped = ++micro_ == accum_ || where.close_group;
  if (out.optimizer_stepped) micro_ = 0;
  static_cast<StepOutputs&>(out) = run_phases(batch, out.optimizer_stepped, where.lr);
  return out;
}

StepOutputs TrainStep::run_phases(const data::DeviceBatch& batch, bool ends_group, double lr) {
  StepOutputs out;
  const Tensor loss = forward(batch, {.sync = ends_group}, &out.hits);
  phase_ended();
  backward(loss);
  phase_ended();
  wait_for_gradients();
  phase_ended();
  if (ends_group) {
    optimizer_step(lr);
    phase_ended();
  }
  out.loss = loss.detach();  // the autograd graph (and what it saved) goes now, not with the loss
  return out;
}

// Eager phases only: inside the graph's warm-up and capture the hook would be recorded too.
void TrainStep::phase_ended() const {
  if (phase_end_ && !graph_) phase_end_();
}

Tensor TrainStep::forward(const data::DeviceBatch& batch, ForwardOptions options, Tensor* hits) {
  trace::Span span("forward", "compute");
  CG_NVTX_RANGE("forward");
  ops::ExecutionScope in_context(context_);  // layout, kernels and autocast, as configured
  if (!ddp_) return ops::cross_entropy(model_(batch.images), batch.labels, hits);
  std::optional<dist::DistributedDataParallel::NoSync> accumulate_only;
  if (!options.sync) accumulate_only.emplace(ddp_->no_sync());
  return ops::cross_entropy((*ddp_)(batch.images), batch.labels, hits);
}

void TrainStep::backward(const Tensor& loss) {
  trace::Span span("backward", "compute");
  CG_NVTX_RANGE("backward");
  const Tensor l = accum_ > 1 ? ops::scale(loss, 1.0 / double(accum_)) : loss;
  if (scaler_) scaler_->backward(l);
  else l.backward();
}

void TrainStep::wait_for_gradients() {
  if (!ddp_) return;
  trace::Span span("wait for all-reduces", "compute");
  CG_NVTX_RANGE("wait for all-reduces");
  ddp_->reducer().wait_for_gradients();
}

void TrainStep::optimizer_step(double lr) {
  {
    trace::Span span("optimizer", "compute");
    CG_NVTX_RANGE("optimizer");
    if (scaler_) {
      scaler_->step(optimizer_, lr);  // agreed over the ranks (dist::agree_on_overflow)
    } else {
      optimizer_.step(lr);
    }
  }
  if (ddp_) ddp_->reducer().start_parameter_gather();  // sharded: the shards each rank updated, to all
  if (ddp_) ddp_->reducer().zero_grad();  // gradients stay views of DDP's flat buffer
  else optimizer_.zero_grad();
}

}  // namespace cg::train
