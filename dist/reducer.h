// What DDP hands gradients to (PyTorch's Reducer, flashlight's fl::Reducer): DDP arms it before
// each forward and tells it, through the autograd grad-ready hooks, which gradient is final; the
// reducer owns the gradients' flat buffer and its buckets (dist/gradient_buckets.h) and
// communicates each bucket the moment it is complete, while backward goes on. The training loop
// then waits for the gradients, steps the optimizer and zeroes them through it. Which one is the
// sharding strategy (dist.sharding, dist/sharding.h); nothing above DDP asks which:
//   BucketedAllReduce  no_shard: each bucket all-reduced (averaged) over the ranks
//                      (bucketed_all_reduce.h);
//   ShardedBuckets     optimizer (ZeRO-1) and shard_grad_op (ZeRO-2): each bucket reduce-scattered,
//                      the optimizer stepping this rank's shards, the parameters all-gathered
//                      after the step; shard_grad_op also frees the whole gradients between steps
//                      (sharded_buckets.h).
//   FullShard          full_shard (ZeRO-3) and hybrid_shard: parameters too sharded per unit,
//                      gathered around each unit's forward and backward (full_shard.h).
// dist.grad_compression is not a reducer of its own: the reducer's transport is wrapped in the
// 16-bit decorator (dist/grad_compression.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "dist/gradient_buckets.h"
#include "nn/optimizer.h"

namespace cg::dist {

class Reducer {
 public:
  virtual ~Reducer() = default;

  // ---- DDP's calls
  // Before the forward whose backward follows: `sync` says whether that backward communicates
  // (false under DDP's no_sync(): gradients only accumulate). Waits for parameters still being
  // gathered. Fails when a gradient is no longer the reducer's view (see zero_grad).
  virtual void prepare_for_backward(bool sync) = 0;
  // The grad-ready hook of parameter `param` (named_parameters() order): its gradient is final.
  virtual void gradient_ready(size_t param) = 0;

  // ---- the training loop's
  // After backward, before the optimizer: makes the current stream (the caller, on the CPU) wait
  // for every bucket's collective (nothing to do after a no-sync forward). Fails naming any
  // parameter that received no gradient.
  virtual void wait_for_gradients() = 0;
  // Zeroes the flat gradient buffer. The optimizer's or the module's zero_grad would free the
  // views the reducer communicates, so the next forward refuses to run after them.
  virtual void zero_grad() = 0;
  // After the optimizer step: starts bringing the updated parameters to every rank (ZeRO-1's
  // all-gathers, on the communication thread or stream); nothing to do where every rank updated
  // all of them.
  virtual void start_parameter_gather() = 0;
  // Waits for those (the next forward does it too): before evaluating, checkpointing or
  // comparing the weights.
  virtual void wait_for_parameters() = 0;

  // ---- the builder's and the checkpoint's
  // The optimizer that steps the model's parameters, before the first forward. A sharding
  // reducer hands it the slices this rank updates (nn::Optimizer::shard); the all-reduce leaves
  // it whole.
  virtual void attach(nn::Optimizer& optimizer) = 0;
  // Every rank takes part: the attached optimizer's whole state, in the unsharded names, shapes
  // and order (a checkpoint's).
  virtual nn::NamedTensors full_optimizer_state() = 0;
  // Every rank takes part: `model`'s state_dict with every parameter whole (full_shard: gathered
  // unit by unit, copied on rank 0 only, undefined tensors elsewhere). Others: the live one.
  virtual nn::NamedTensors full_model_state(const nn::Module& model) { return model.state_dict(); }
  // What every rank must hold alike at the end (the replica check): the state_dict, or under
  // full_shard, whose parameters are not replicated, the buffers.
  virtual nn::NamedTensors replicated_state(const nn::Module& model) { return model.state_dict(); }
  virtual const char* replicated_what() const { return "weights"; }  // what replicated_state() holds
  // Whether this rank writes its pieces into a sharded checkpoint (checkpoint.format=sharded):
  // every rank but where another rank's pieces are the same (hybrid_shard's other nodes).
  virtual bool writes_checkpoint_shard() const { return true; }
  // What this rank holds now, in bytes (the memory a strategy saves: logs, benchmarks, tests).
  struct Resident {
    int64_t parameters = 0, gradients = 0, optimizer_state = 0;
  };
  virtual Resident resident_bytes() const = 0;
  // What one synced step communicates, for the start-up log.
  virtual std::string describe() const = 0;

  // Gradient bytes one synced step sends (the payload, as GradientBuckets::bytes_per_step), and
  // the modeled transport's time for the step's collectives (0 on a real one).
  virtual size_t bytes_per_step() const { return buckets().bytes_per_step(); }
  virtual double modeled_ms_per_step(const GradientComm& comm) const {
    return dist::modeled_ms_per_step(buckets(), comm);
  }

  // The flat buffer and its buckets (sizes, bytes, the last collectives: logs, benchmarks, tests).
  // The bucketed reducers'; full_shard has units instead and throws.
  virtual const GradientBuckets& buckets() const = 0;
};

}  // namespace cg::dist
