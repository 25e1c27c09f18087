// The flat gradient buffer under DDP's reducers and its cut into buckets. Every parameter's .grad
// is a view into one flat float32 buffer; a bucket is a contiguous slice of it, filled in the
// order backward produces gradients: reverse registration order at first, laid out again once
// from the order observed in the first synced backward. The bookkeeping of a backward lives here
// (which gradients are final, which bucket just became complete, which parameter got none);
// what to do with a complete bucket is the reducer's (dist/reducer.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "engine/tensor.h"
#include "nn/module.h"

namespace cg::dist {

class GradientComm;

// Every parameter's (and gradient's) offset in the flat buffers is a multiple of this many bytes;
// the gaps between parameters belong to no parameter and stay zero. Packed end to end, a float32
// parameter would start at any 4-byte offset, and cuDNN's filter pointers and vectorized (float4)
// loads want 16-byte alignment at least. 256 bytes rather than 16: it is cudaMalloc's guarantee and
// the caching allocator's, so a parameter in the flat buffer is aligned exactly as one allocated
// on its own, and no kernel or algorithm choice can tell them apart. The cost is at most 63 floats
// per parameter (about 0.1% of MiniResNet's buffer, a few KB on the wire).
inline constexpr int64_t kFlatAlignmentBytes = 256;
inline constexpr int64_t kFlatAlignmentFloats = kFlatAlignmentBytes / int64_t(sizeof(float));
// The next offset (in floats) at which a parameter may start in a flat buffer.
inline int64_t align_to_flat(int64_t offset) {
  return (offset + kFlatAlignmentFloats - 1) / kFlatAlignmentFloats * kFlatAlignmentFloats;
}

struct BucketOptions {
  double bucket_cap_mb = 4.0;    // see dist.bucket_cap_mb in train/train_config.cpp
  double first_bucket_mb = 1.0;  // small first bucket: its collective starts as early as possible
  DType wire = DType::f32;       // what a bucket's elements travel as (dist.grad_compression)
  // The length a bucket of `count` floats takes in the buffer (ZeRO-1: the transport's shard
  // padding, dist/gradient_comm.h); empty: count.
  std::function<int64_t(int64_t count)> pad;
};

class GradientBuckets {
 public:
  struct Bucket {
    int64_t offset = 0, count = 0;  // slice of the flat buffer (alignment padding between parameters included)
    int64_t padded = 0;             // count plus BucketOptions::pad's padding
    std::vector<size_t> params;     // indices into params()
    size_t pending = 0;             // gradients not yet final in this backward
    std::shared_ptr<Work> work;     // the bucket's collective in the last synced backward
  };

  // Lays the buffer out in reverse parameter order and makes every gradient a view into it.
  GradientBuckets(const nn::NamedTensors& params, const BucketOptions& options);

  // Before a forward: refuses gradients that are no longer views of the buffer (see zero()),
  // lays the buckets out again once from the order gradients became ready in the first synced
  // backward (returns true then: the reducer's layout-dependent state follows), and arms the
  // counters. `sync`: whether the coming backward communicates.
  bool prepare(bool sync);
  // The grad-ready hook of parameter `param`: the bucket it completed, if any (never after a
  // no-sync forward). Fails on a gradient that arrives twice.
  std::optional<size_t> ready(size_t param);
  // After backward: whether it communicated (false after a no-sync forward). Fails naming every
  // parameter that received no gradient (it would leave its bucket uncommunicated on this rank).
  bool finish_backward();
  // Zeroes the buffer. The optimizer's or the module's zero_grad would free the views the
  // reducer communicates, so the next forward refuses to run after them.
  void zero() {
    if (flat_.defined()) flat_.zero_();
  }
  // dist.sharding=shard_grad_op, once this rank's shards are copied out: frees the flat buffer,
  // every gradient becoming undefined, until the next prepare() allocates it again (zeroed) and
  // makes the gradients its views again. Before the next forward, so the forward's activations
  // never share memory with whole gradients.
  void release();

  size_t size() const { return buckets_.size(); }
  Bucket& operator[](size_t b) { return buckets_[b]; }
  const Bucket& operator[](size_t b) const { return buckets_[b]; }
  const nn::NamedTensors& params() const { return params_; }
  Device device() const { return device_; }
  // The flat buffer (undefined while released), and each parameter's offset in it (floats, in
  // params() order). Elements no parameter covers are alignment padding, always zero.
  const Tensor& flat() const { return flat_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  DType wire() const { return options_.wire; }  // what a bucket's elements travel as
  // For logs: "float32", or "fp16 compressed" / "bf16 compressed" (dist.grad_compression).
  std::string wire_label() const;
  // Elements in each bucket, in order (for the modeled communication time of a step).
  std::vector<int64_t> sizes() const;
  // The collectives of the last synced backward, bucket by bucket (for timelines and tests).
  std::vector<std::shared_ptr<Work>> works() const;
  // Bytes each bucket's collective carries per synced step (its element count times the wire
  // type's size), in bucket order, and their total: the payload, not counting the ring's
  // 2(W-1)/W (a reduce-scatter's (W-1)/W) factor.
  std::vector<size_t> bytes_per_bucket() const;
  size_t bytes_per_step() const;

 private:
  void lay_out(const std::vector<size_t>& order);
  void point_gradients_at_flat();
  void check_gradients_are_views() const;

  nn::NamedTensors params_;
  BucketOptions options_;
  Device device_;
  Tensor flat_;
  int64_t flat_numel_ = 0;            // flat_'s length, kept while it is released
  std::vector<int64_t> offsets_;      // param index -> offset in flat_
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;     // param index -> bucket index
  std::vector<size_t> ready_order_;   // observed in the first synced backward
  std::vector<char> ready_;           // per parameter, in the current backward
  bool rebuilt_ = false;
  bool sync_backward_ = true;         // the last forward's backward communicates
  bool in_backward_ = false;
};

// After a synced backward: fails naming every parameter whose `ready` flag is unset (unused in
// the forward?), which left `what` (its bucket, its unit) uncommunicated on this rank.
void check_every_gradient_arrived(const nn::NamedTensors& params, const std::vector<char>& ready,
                                  const std::string& what);

// The modeled transport's time for one step's bucket collectives (the ring model of each bucket,
// summed); 0 for a real transport.
double modeled_ms_per_step(const GradientBuckets& buckets, const GradientComm& comm);

}  // namespace cg::dist
