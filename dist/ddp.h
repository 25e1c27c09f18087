// Data parallelism with PyTorch DDP's semantics (PyTorch's DistributedDataParallel(model)): the
// caller runs forward through it and backward as usual; no_sync() is the one knob for gradient
// accumulation. At construction, parameters and buffers are broadcast from rank 0 (one
// collective), so every replica starts equal, and every parameter gets a grad-ready hook that
// hands its final gradient to the reducer (dist/reducer.h), which owns the flat gradient buffer
// and its buckets and communicates each bucket while backward goes on. Before each forward the
// buffers (BatchNorm statistics) come from rank 0 in one coalesced broadcast. The training loop
// waits for the gradients, zeroes them and (sharded) gathers the parameters through reducer().
// Which reducer: DdpOptions::sharding (dist/sharding.h) picks ShardedBuckets
// (dist/sharded_buckets.h) for optimizer and shard_grad_op, FullShard (dist/full_shard.h) for
// full_shard, BucketedAllReduce for no_shard; with
// dist.grad_compression the reducer's buckets travel through the 16-bit decorator
// (dist/grad_compression.h). SyncBatchNorm is attached by whoever builds the model's
// data parallelism (dist/sync_batch_norm.h), over comm().
#pragma once
#include <memory>

#include "dist/grad_compression.h"
#include "dist/gradient_comm.h"
#include "dist/process_group.h"
#include "dist/reducer.h"
#include "dist/full_shard.h"
#include "dist/sharding.h"
#include "nn/module.h"

namespace cg::dist {

struct DdpOptions {
  double bucket_cap_mb = 4.0;    // see dist.bucket_cap_mb in train/train_config.cpp
  double first_bucket_mb = 1.0;  // small first bucket: its all-reduce starts as early as possible
  bool broadcast_buffers = true;  // BatchNorm statistics from rank 0 before each forward
  Sharding sharding = Sharding::no_shard;  // dist.sharding (dist/sharding.h)
  // full_shard: which submodules are units of their own (MiniResNet: nn::is_residual_block);
  // unset, the whole model is one unit.
  UnitPolicy shard_units;
  // dist.grad_compression: buckets all-reduced in 16 bits as PyTorch's fp16/bf16 compress hooks
  // (dist/grad_compression.h); the scaler's found_inf is never compressed.
  GradCompression grad_compression = GradCompression::none;
  // hybrid_shard: the transports of this rank's node and of its replicas on the other nodes (null
  // with one node), which outlive the DDP (train::DistContext::hybrid_comms).
  GradientComm* hybrid_node = nullptr;
  GradientComm* hybrid_replicas = nullptr;
  // dist.param_dtype: full_shard's and hybrid_shard's gathers in 16 bits (FSDP's MixedPrecision
  // param_dtype; dist/full_shard.h); refused with the other strategies.
  ParamDType param_dtype = ParamDType::float32;
};

class DistributedDataParallel {
 public:
  // CPU tensors over the Gloo process group.
  DistributedDataParallel(nn::Module& model, ProcessGroup& group, const DdpOptions& options);
  // Any device and transport (dist/gradient_comm.h). On a GPU, gradients are communicated after
  // events on the caller's current stream, which waits for them with events in turn.
  DistributedDataParallel(nn::Module& model, std::unique_ptr<GradientComm> comm, const DdpOptions& options);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The model's forward on `input`. First arms the reducer (the backward of this output
  // communicates, unless a no_sync() guard was alive here) and brings the buffers to rank 0's.
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // PyTorch's no_sync(): the backward of a forward run while the guard lives only accumulates
  // locally (gradient accumulation); the first backward of a forward without it communicates the
  // accumulated sum. Guards do not nest.
  class NoSync {
   public:
    NoSync(NoSync&& other) noexcept : ddp_(other.ddp_) { other.ddp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;
    ~NoSync();

   private:
    friend class DistributedDataParallel;
    explicit NoSync(DistributedDataParallel& ddp);
    DistributedDataParallel* ddp_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // Brings every rank's buffers (BatchNorm statistics) to rank 0's now, as the next forward would:
  // before comparing replicas.
  void sync_buffers();

  // Where the gradients go: wait_for_gradients, zero_grad, the parameters' gather, the optimizer
  // attached and its state gathered whole (reducer.h).
  Reducer& reducer() { return *reducer_; }
  Sharding sharding() const { return options_.sharding; }
  // The transport, uncompressed (SyncBatchNorm, the scaler's overflow agreement, CUDA graphs).
  GradientComm& comm() { return *comm_; }

 private:
  nn::Module& model_;
  std::unique_ptr<GradientComm> comm_;
  std::unique_ptr<GradientComm> compressed_;  // dist.grad_compression's decorator over comm_
  DdpOptions options_;
  Device device_;
  bool no_sync_ = false;  // a NoSync guard is alive
  std::unique_ptr<Reducer> reducer_;
};

// Overwrites every tensor of `tensors` (all on `device`) with rank 0's values in one collective:
// packed into one byte buffer, broadcast, unpacked, in `compute` order.
void broadcast_coalesced(GradientComm& comm, nn::NamedTensors& tensors, Device device, const Stream& compute);

}  // namespace cg::dist
