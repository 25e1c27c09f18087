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
//   hybrid_shard   full_shard within each node (1/L, L ranks a node),  per unit as full_shard over
//                  the same shard on every node                       the node's ranks, then the
//                                                                      gradient shard all-reduced
//                                                                      over the nodes
//
// One component serves each: DDP (dist/ddp.h) picks its reducer (dist/reducer.h) from the
// strategy (BucketedAllReduce, ShardedBuckets, FullShard), and everything above it (the optimizer, the step, the trainer) talks to that reducer
// only: the optimizer receives the slices this rank updates, the checkpoint asks the reducer for
// the optimizer's whole state. optim.zero_sharding=true is the older name of
// dist.sharding=optimizer.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "util/dtype.h"
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

// The strategies that gather a unit's parameters before its forward and backward.
inline bool gathers_parameters(Sharding s) { return s == Sharding::full_shard || s == Sharding::hybrid_shard; }

// dist.param_dtype: the type full_shard and hybrid_shard gather parameters in (PyTorch FSDP's
// MixedPrecision param_dtype). The masters, their gradients and the optimizer state stay float32.
enum class ParamDType { float32, fp16, bf16 };
inline EnumNames<ParamDType> enum_names(ParamDType) {
  return {{ParamDType::float32, "float32"}, {ParamDType::fp16, "fp16"}, {ParamDType::bf16, "bf16"}};
}
inline DType gather_dtype(ParamDType p) {
  return p == ParamDType::fp16 ? DType::f16 : p == ParamDType::bf16 ? DType::bf16 : DType::f32;
}

// hybrid_shard's place of a rank (dist/sharding.h's table): node `node` of `nodes`, holding the
// shard `local` of `local_world`. Ranks are numbered node by node, as torchrun and mpirun number
// them (rank = node * local_world + local); `why_not` says why the job cannot be cut so.
struct HybridPlace {
  int node = 0, nodes = 1, local = 0, local_world = 1;
  std::string why_not;
};
inline HybridPlace hybrid_place(int rank, int world, int local_rank, int local_world) {
  HybridPlace p{rank / std::max(local_world, 1), world / std::max(local_world, 1), local_rank, local_world, ""};
  if (local_world < 2)
    p.why_not = "dist.sharding=hybrid_shard needs several ranks a node to shard over (the launcher says one a node: "
                "across nodes alone it is no_shard)";
  else if (world % local_world != 0 || rank % local_world != local_rank)
    p.why_not = fmt::format("dist.sharding=hybrid_shard needs every node to run the same number of ranks, numbered "
                            "node by node (rank {} of {} is local rank {} of {})", rank, world, local_rank, local_world);
  return p;
}
// Whether the strategy cuts the optimizer's state (and so needs the transport's reduce-scatter
// and all-gather).
inline bool shards_optimizer(Sharding s) { return s != Sharding::no_shard; }

}  // namespace cg::dist
