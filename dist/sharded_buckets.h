// ZeRO-1 as a reducer (dist/reducer.h; PyTorch's ZeroRedundancyOptimizer inside the reducer):
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
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "dist/reducer.h"
#include "nn/optimizer.h"

namespace cg::dist {

class ShardedBuckets : public Reducer {
 public:
  // `transport` (float32: parameters, optimizer state) and `bucket_comm` (the gradients: the
  // transport, or the 16-bit decorator over it) must outlive this object. Fails naming the
  // transport when it has no shard collectives.
  ShardedBuckets(const nn::NamedTensors& params, GradientComm& transport, GradientComm& bucket_comm,
                 BucketOptions options);
  ~ShardedBuckets() override;  // waits for all-gathers still writing into the parameters
  ShardedBuckets(const ShardedBuckets&) = delete;
  ShardedBuckets& operator=(const ShardedBuckets&) = delete;

  // The optimizer whose state is cut to this rank's shards (it must step the model's parameters;
  // attach before the first forward).
  void attach(nn::Optimizer& optimizer);

  void prepare_for_backward(bool sync) override;
  void gradient_ready(size_t param) override;
  void wait_for_gradients() override;
  void zero_grad() override { buckets_.zero(); }
  void start_parameter_gather() override;
  void wait_for_parameters() override;
  const GradientBuckets& buckets() const override { return buckets_; }

  // Every rank: the attached optimizer's whole state, gathered from the ranks' shards in the
  // unsharded names, shapes and order (a checkpoint's). Element-wise state is assumed held for
  // every parameter (true under DDP, where each step reaches all of them).
  nn::NamedTensors gather_optimizer_state();
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
  void lay_out_parameters();
  std::map<std::string, nn::Optimizer::Range> owned_ranges() const;

  GradientComm& transport_;
  GradientComm& bucket_comm_;
  ShardCollectives& shards_;
  GradientBuckets buckets_;
  Tensor flat_params_;                 // every parameter is a view into it
  nn::Optimizer* optimizer_ = nullptr;
  bool sharding_active_ = false;       // from the second layout on
  std::vector<std::shared_ptr<Work>> gathers_;
  bool gathers_pending_ = false;
};

}  // namespace cg::dist
