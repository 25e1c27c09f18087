// dist.sharding: what each data-parallel rank keeps of the training state, named as PyTorch's
// FSDP ShardingStrategy names it (DeepSpeed's ZeRO stages in brackets). W ranks; "1/W" is this
// rank's shard of every gradient bucket (dist/gradient_comm.h, ShardCollectives::shard_bounds):
//
//   strategy       parameters  gradients between steps  optimizer state  collectives per step
//   no_shard       all         all                      all              all-reduce (DDP)
//   optimizer      all         all                      1/W  (ZeRO-1)    reduce-scatter + all-gather
//   shard_grad_op  all         1/W                      1/W  (ZeRO-2)    reduce-scatter + all-gather
//   full_shard     1/W         1/W                      1/W  (ZeRO-3)    per unit: all-gather before
//                                                                         forward and backward,
//                                                                         reduce-scatter after
//   hybrid_shard   full_shard within a node, replicas across nodes       not built yet
//
// One component serves each: DDP (dist/ddp.h) picks its reducer (dist/reducer.h) from the
// strategy (BucketedAllReduce, ShardedBuckets, FullShard), and everything above it (the optimizer, the step, the trainer) talks to that reducer
// only: the optimizer receives the slices this rank updates, the checkpoint asks the reducer for
// the optimizer's whole state. optim.zero_sharding=true is the older name of
// dist.sharding=optimizer.
#pragma once
#include <string>

#include "util/enum_names.h"

namespace cg::dist {

enum class Sharding { no_shard, optimizer, shard_grad_op, full_shard, hybrid_shard };
inline EnumNames<Sharding> enum_names(Sharding) {
  return {{Sharding::no_shard, "no_shard"},
          {Sharding::optimizer, "optimizer"},
          {Sharding::shard_grad_op, "shard_grad_op"},
          {Sharding::full_shard, "full_shard"},
          {Sharding::hybrid_shard, "hybrid_shard"}};
}

// Why this build cannot run `s` ("" when it can).
inline std::string sharding_refusal(Sharding s) {
  if (s == Sharding::hybrid_shard)
    return "dist.sharding=hybrid_shard is not built yet; no_shard, optimizer, shard_grad_op and full_shard are";
  return "";
}

// Whether the strategy cuts the optimizer's state (and so needs the transport's reduce-scatter
// and all-gather).
inline bool shards_optimizer(Sharding s) { return s != Sharding::no_shard; }

}  // namespace cg::dist
