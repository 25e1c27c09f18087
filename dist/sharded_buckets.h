// ZeRO-1 and ZeRO-2 as a reducer (dist.sharding=optimizer and shard_grad_op, dist/sharding.h;
// PyTorch's ZeroRedundancyOptimizer inside the reducer, FSDP's SHARD_GRAD_OP without units):
// the parameters too live in one flat buffer laid out as the gradients' (each parameter a view
// into it), every bucket is cut into one shard per rank (ShardCollectives::shard_bounds; on Gloo
// the blocks of its ring all-reduce, so sums come out bit-identical to unsharded DDP), and a rank
// owns its shard of every bucket. The first synced step is a plain DDP step (all-reduce, whole
// update); from the layout that follows it on, a bucket is reduce-scattered the moment it is
// complete, the attached optimizer keeps state for and updates only this rank's shards, and
// start_parameter_gather() all-gathers the updated shards bucket by bucket, waited for at the
// next forward (or wait_for_parameters()). With dist.grad_compression the bucket transport is the
// 16-bit decorator, whose reduce-scatter is the first half of its all-reduce, so sharded
// compressed training is bit-identical to unsharded compressed DDP; parameters and optimizer
// state always travel in float32 over the plain transport.
// shard_grad_op adds one thing: once a synced backward's reduce-scatters are done, this rank's
// shards are copied into a buffer of their own (1/W of the gradients) and the whole gradient
// buffer is freed until the next forward's backward needs it (GradientBuckets::release); the
// optimizer steps with the copies. Same sums, same updates: bit-identical to ZeRO-1. Under
// gradient accumulation the whole gradients live from the first micro-batch to the synced one,
// as FSDP's no_sync() keeps them.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "dist/reducer.h"
#include "dist/sharding.h"
#include "nn/optimizer.h"

namespace cg::dist {

class ShardedBuckets : public Reducer {
 public:
  // `transport` (float32: parameters, optimizer state) and `bucket_comm` (the gradients: the
  // transport, or the 16-bit decorator over it) must outlive this object. `strategy`: optimizer
  // or shard_grad_op. Fails naming the transport when it has no shard collectives.
  ShardedBuckets(const nn::NamedTensors& params, GradientComm& transport, GradientComm& bucket_comm,
                 BucketOptions options, Sharding strategy);
  ~ShardedBuckets() override;  // waits for all-gathers still writing into the parameters
  ShardedBuckets(const ShardedBuckets&) = delete;
  ShardedBuckets& operator=(const ShardedBuckets&) = delete;

  void prepare_for_backward(bool sync) override;
  void gradient_ready(size_t param) override;
  void wait_for_gradients() override;
  void zero_grad() override;
  void start_parameter_gather() override;
  void wait_for_parameters() override;
  // The optimizer whose state is cut to this rank's shards (it must step the model's parameters;
  // attach before the first forward).
  void attach(nn::Optimizer& optimizer) override;
  // Element-wise state is assumed held for every parameter (true under DDP, where each step
  // reaches all of them).
  nn::NamedTensors full_optimizer_state() override;
  Resident resident_bytes() const override;
  std::string describe() const override;
  const GradientBuckets& buckets() const override { return buckets_; }

  // Parameter elements whose optimizer state this rank holds once sharding is active (its shards
  // of the buckets as laid out now), and the model's total.
  int64_t owned_elements() const;
  int64_t total_elements() const;
  // The all-gathers of the last step, bucket by bucket (for timelines and tests).
  const std::vector<std::shared_ptr<Work>>& last_all_gathers() const { return gathers_; }
  // The flat parameter buffer, laid out as buckets().flat() (for tests).
  const Tensor& flat_parameters() const { return flat_params_; }
  // The float32 bytes of parameters all-gathered per step.
  size_t gather_bytes_per_step() const;

 private:
  // A run of this rank's elements inside one parameter: [flat_begin, flat_begin + count) of the
  // flat buffers, at shard_offset in the gradient shards (shard_grad_op).
  struct OwnedSpan {
    size_t param;
    int64_t flat_begin, count, shard_offset;
  };
  std::vector<OwnedSpan> owned_spans() const;  // bucket by bucket, in the current layout
  std::map<std::string, nn::Optimizer::Range> owned_ranges() const;
  void lay_out_parameters();
  void start_sharding();  // from the second layout on
  void keep_gradient_shards();  // shard_grad_op, after a synced backward

  GradientComm& transport_;
  GradientComm& bucket_comm_;
  ShardCollectives& shards_;
  GradientBuckets buckets_;
  const bool shard_gradients_;         // shard_grad_op
  Tensor flat_params_;                 // every parameter is a view into it
  Tensor gradient_shards_;             // shard_grad_op: this rank's shard of every bucket, end to end
  nn::Optimizer* optimizer_ = nullptr;
  bool sharding_active_ = false;       // from the second layout on
  std::vector<std::shared_ptr<Work>> gathers_;
  bool gathers_pending_ = false;
};

}  // namespace cg::dist
