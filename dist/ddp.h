// Data parallelism with PyTorch DDP's semantics. At construction, parameters and buffers are
// broadcast from rank 0, so every replica starts equal. Gradients live in one flat buffer and
// every parameter's .grad is a view into it; buckets are contiguous slices, filled in the order
// backward produces gradients (reverse registration order at first, rebuilt once from the order
// observed in the first step). The moment a bucket's last gradient is final (the autograd
// grad-ready hook), its all-reduce (average) is issued on the communication thread while backward
// goes on; finish_gradient_sync() waits for all of them before the optimizer step.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace cg::dist {

struct DdpOptions {
  double bucket_cap_mb = 4.0;    // see dist.bucket_cap_mb in apps/common/train_config.cpp
  double first_bucket_mb = 1.0;  // small first bucket: its all-reduce starts as early as possible
  bool broadcast_buffers = true;  // BatchNorm statistics from rank 0 before each forward
};

class DistributedDataParallel {
 public:
  // CPU tensors over the Gloo process group.
  DistributedDataParallel(nn::Module& model, ProcessGroup& group, const DdpOptions& options);
  // Any device and transport (dist/gradient_comm.h). On a GPU, gradients are all-reduced after
  // events on the caller's current stream, which waits for them with events in turn.
  DistributedDataParallel(nn::Module& model, std::unique_ptr<GradientComm> comm, const DdpOptions& options);

  // Before each forward: broadcasts buffers from rank 0 (PyTorch's default) and makes sure every
  // parameter's .grad is its view of the flat buffer.
  void before_forward();
  // After backward, before the optimizer: waits for every bucket's all-reduce. Fails naming any
  // parameter that received no gradient (it would leave its bucket unreduced on this rank).
  void finish_gradient_sync();
  // false: the next backward passes only accumulate locally (gradient accumulation); PyTorch's
  // no_sync(). The first backward with sync on again communicates the accumulated sum.
  void set_require_sync(bool on) { require_sync_ = on; }
  // Zeroes the flat gradient buffer (the optimizer's zero_grad would free the views).
  void zero_grad();
  // Mixed precision: makes every rank's one-element float32 found_inf non-zero when any rank's
  // is (an average over ranks, in stream order: no host wait with NCCL), so all skip together.
  void agree_on_overflow(Tensor& found_inf);

  size_t num_buckets() const { return buckets_.size(); }
  const GradientComm& comm() const { return *comm_; }
  // Elements in each bucket, in order (for the modeled communication time of a step).
  std::vector<int64_t> bucket_sizes() const;
  // The all-reduces of the last synced backward, bucket by bucket (for timelines and tests).
  std::vector<std::shared_ptr<Work>> last_all_reduces() const;
  const std::vector<std::vector<std::string>>& bucket_parameters() const { return bucket_names_; }

 private:
  struct Bucket {
    int64_t offset = 0, count = 0;   // slice of the flat buffer
    std::vector<size_t> params;      // indices into params_
    size_t pending = 0;              // gradients not yet final in this backward
    std::shared_ptr<Work> work;
  };

  void build_buckets(const std::vector<size_t>& order);
  void on_gradient_ready(size_t param);

  nn::Module& model_;
  std::unique_ptr<GradientComm> comm_;
  DdpOptions options_;
  Device device_;
  nn::NamedTensors params_;
  Tensor flat_;                        // all gradients, bucket after bucket
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;      // param index -> bucket index
  std::vector<std::vector<std::string>> bucket_names_;
  std::vector<size_t> ready_order_;    // observed in the first synced backward
  std::vector<char> ready_;            // per parameter, in the current backward
  bool rebuilt_ = false;
  bool require_sync_ = true;
  bool in_backward_ = false;
};

}  // namespace cg::dist
