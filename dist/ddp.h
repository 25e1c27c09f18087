// Data parallelism with PyTorch DDP's semantics, as one object that owns the protocol: the caller
// runs forward through it and backward as usual, waits for the gradients, and zeroes them through
// it; no_sync() is the one knob for gradient accumulation (PyTorch's DistributedDataParallel(model)).
// At construction, parameters and buffers are broadcast from rank 0 (one collective), so every
// replica starts equal. Gradients live in one flat buffer and every parameter's .grad is a view into
// it; buckets are contiguous slices, filled in the order backward produces gradients (reverse
// registration order at first, rebuilt once from the order observed in the first step). The moment
// a bucket's last gradient is final (the autograd grad-ready hook), its all-reduce (average) is
// issued on the communication thread while backward goes on; wait_for_gradients() waits for all of
// them before the optimizer step.
//
// ZeRO-1 (DdpOptions::zero_sharding, PyTorch's ZeroRedundancyOptimizer inside the reducer): the
// parameters too live in one flat buffer laid out as the gradients' (each parameter a view into
// it), every bucket is cut into one shard per rank (GradientComm::shard_bounds; on Gloo the blocks
// of its ring all-reduce, so sums come out bit-identical to unsharded DDP), and a rank owns its
// shard of every bucket. The first synced step is a plain DDP step (all-reduce, whole update);
// from the bucket rebuild that follows it on, a bucket is reduce-scattered the moment it is
// complete, the attached optimizer keeps state for and updates only this rank's shards, and
// start_parameter_gather() all-gathers the updated shards bucket by bucket, waited for at the next
// forward (or wait_for_parameters() before anything else reads the weights). With
// dist.grad_compression the reduce-scatter is the first half of the 16-bit all-reduce
// (GradientComm::reduce_scatter_compressed: divide, cast, 16-bit sum of this rank's shard, cast
// back), so sharded compressed training is bit-identical to unsharded compressed DDP; the
// parameters' all-gather stays float32 (parameters are never compressed, as in PyTorch).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "dist/process_group.h"
#include "dist/sync_batchnorm.h"
#include "nn/grad_scaler.h"
#include "nn/optimizer.h"
#include "nn/module.h"

namespace cg::dist {

// Every parameter's (and gradient's) offset in DDP's flat buffers is a multiple of this many
// bytes; the gaps between parameters belong to no parameter and stay zero. Packed end to end, a
// float32 parameter would start at any 4-byte offset, and cuDNN's filter pointers and vectorized
// (float4) loads want 16-byte alignment at least. 256 bytes rather than 16: it is cudaMalloc's
// guarantee and the caching allocator's, so a parameter in the flat buffer is aligned exactly as
// one allocated on its own, and no kernel or algorithm choice can tell them apart. The cost is at
// most 63 floats per parameter (about 0.1% of MiniResNet's buffer, a few KB on the wire).
inline constexpr int64_t kFlatAlignmentBytes = 256;
inline constexpr int64_t kFlatAlignmentFloats = kFlatAlignmentBytes / int64_t(sizeof(float));

struct DdpOptions {
  double bucket_cap_mb = 4.0;    // see dist.bucket_cap_mb in train/train_config.cpp
  double first_bucket_mb = 1.0;  // small first bucket: its all-reduce starts as early as possible
  bool broadcast_buffers = true;  // BatchNorm statistics from rank 0 before each forward
  bool zero_sharding = false;     // ZeRO-1, see optim.zero_sharding and "ZeRO-1" below
  // SyncBatchNorm over this DDP's transport for every BatchNorm2d (dist/sync_batchnorm.h); see
  // model.sync_batchnorm in train/train_config.cpp.
  bool sync_batchnorm = false;
  // dist.grad_compression: buckets all-reduced in 16 bits as PyTorch's fp16/bf16 compress hooks
  // (dist/grad_compression.h); the scaler's found_inf is never compressed.
  GradCompression grad_compression = GradCompression::none;
};

class DistributedDataParallel {
 public:
  // CPU tensors over the Gloo process group.
  DistributedDataParallel(nn::Module& model, ProcessGroup& group, const DdpOptions& options);
  // Any device and transport (dist/gradient_comm.h). On a GPU, gradients are all-reduced after
  // events on the caller's current stream, which waits for them with events in turn.
  DistributedDataParallel(nn::Module& model, std::unique_ptr<GradientComm> comm, const DdpOptions& options);
  ~DistributedDataParallel();  // waits for all-gathers (ZeRO-1) still writing into the parameters
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The model's forward on `input`. First brings the buffers to rank 0's (one coalesced broadcast)
  // and arms the gradient hooks: the backward of this output all-reduces, unless a no_sync() guard
  // was alive here. Fails when a gradient is no longer DDP's view (see zero_grad).
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

  // After backward, before the optimizer: waits for every bucket's all-reduce (nothing to do after
  // a no_sync forward). Fails naming any parameter that received no gradient (it would leave its
  // bucket unreduced on this rank).
  void wait_for_gradients();
  // Zeroes the flat gradient buffer. The optimizer's or the module's zero_grad would free the views
  // DDP all-reduces, so the next forward refuses to run after them.
  void zero_grad();
  // Mixed precision: from now on `scaler` decides on overflow with every rank (the average of the
  // ranks' found_inf flags, in stream order: no host wait with NCCL), so all skip together. This
  // object must outlive the scaler's steps.
  void attach(nn::GradScaler& scaler);
  // Brings every rank's buffers (BatchNorm statistics) to rank 0's now, as the next forward would:
  // before comparing replicas.
  void sync_buffers();

  size_t num_buckets() const { return buckets_.size(); }
  const GradientComm& comm() const { return *comm_; }
  // Elements in each bucket, in order (for the modeled communication time of a step).
  std::vector<int64_t> bucket_sizes() const;
  // The all-reduces of the last synced backward, bucket by bucket (for timelines and tests).
  std::vector<std::shared_ptr<Work>> last_all_reduces() const;
  // BatchNorm2d layers whose statistics are synchronized (0 without options.sync_batchnorm).
  size_t sync_batchnorm_layers() const { return sync_batchnorm_ ? sync_batchnorm_->num_layers() : 0; }

  // ---- ZeRO-1 (zero_sharding). The optimizer whose state is cut to this rank's shards (it must
  // step the model's parameters; attach before the first forward).
  void attach(nn::Optimizer& optimizer);
  bool zero_sharding() const { return options_.zero_sharding; }
  // After the optimizer step: starts all-gathering the updated shards, bucket by bucket (nothing
  // to do before sharding is active). Issued on the communication thread or stream.
  void start_parameter_gather();
  // Waits for those all-gathers (the next forward does it too): before evaluating, checkpointing or
  // comparing the weights.
  void wait_for_parameters();
  // Every rank: the attached optimizer's whole state, gathered from the ranks' shards in the
  // unsharded names, shapes and order (a checkpoint's). Element-wise state is assumed held for
  // every parameter (true under DDP, where each step reaches all of them).
  nn::NamedTensors gather_optimizer_state();
  // Parameter elements whose optimizer state this rank holds once sharding is active (all of them
  // without sharding), and the model's total.
  int64_t owned_elements() const;
  int64_t total_elements() const;
  // The all-gathers of the last step, bucket by bucket (for timelines and tests).
  std::vector<std::shared_ptr<Work>> last_all_gathers() const { return gathers_; }
  // The flat layout (for tests): each parameter's offset in floats, in named_parameters() order,
  // into the flat gradient buffer and, with zero_sharding, the flat parameter buffer (undefined
  // without it). Elements no parameter covers are alignment padding, always zero.
  const std::vector<int64_t>& flat_offsets() const { return param_offset_; }
  const Tensor& flat_gradients() const { return flat_; }
  const Tensor& flat_parameters() const { return flat_params_; }

  // Bytes each bucket's all-reduce (with zero_sharding: reduce-scatter) of gradients carries per
  // synced step (its element count times 4, or 2 with dist.grad_compression), in bucket order, and
  // their total: the payload, not counting the ring's 2(W-1)/W (a reduce-scatter's (W-1)/W)
  // factor, which is the same with and without compression.
  std::vector<size_t> bucket_bytes_per_step() const;
  size_t bytes_per_step() const;
  // The modeled transport's time for one step's bucket collectives (the ring model of each bucket,
  // summed); 0 for a real transport.
  double modeled_ms_per_step() const;
  // zero_sharding: the float32 bytes of parameters all-gathered per step (0 without sharding).
  size_t gather_bytes_per_step() const;

 private:
  struct Bucket {
    int64_t offset = 0, count = 0;   // slice of the flat buffer (alignment padding between parameters included)
    std::vector<size_t> params;      // indices into params_
    size_t pending = 0;              // gradients not yet final in this backward
    std::shared_ptr<Work> work;
    int64_t padded = 0;              // zero_sharding: count plus the transport's shard padding
    Tensor compressed;               // dist.grad_compression: the bucket's 16-bit buffer (padded long)
  };

  void build_buckets(const std::vector<size_t>& order);
  void prepare_for_backward();
  void check_gradients_are_views() const;
  void on_gradient_ready(size_t param);
  void agree_on_overflow(Tensor& found_inf);

  nn::Module& model_;
  std::unique_ptr<GradientComm> comm_;
  DdpOptions options_;
  Device device_;
  nn::NamedTensors params_;
  Tensor flat_;                        // all gradients, bucket after bucket
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;      // param index -> bucket index
  std::vector<size_t> ready_order_;    // observed in the first synced backward
  std::vector<char> ready_;            // per parameter, in the current backward
  bool rebuilt_ = false;
  bool no_sync_ = false;               // a NoSync guard is alive
  bool sync_backward_ = true;          // the last forward's backward communicates
  bool in_backward_ = false;

  // ---- ZeRO-1
  void lay_out_parameters(const std::vector<int64_t>& offsets);
  void activate_sharding();
  std::map<std::string, nn::Optimizer::Range> owned_ranges() const;
  Tensor flat_params_;                 // zero_sharding: every parameter is a view into it
  std::vector<int64_t> param_offset_;  // param index -> offset in flat_ and flat_params_
  nn::Optimizer* optimizer_ = nullptr;
  bool sharding_active_ = false;       // from the first bucket rebuild on
  std::vector<std::shared_ptr<Work>> gathers_;
  bool gathers_pending_ = false;
  // Last, so it detaches its hooks before comm_ goes. Null unless options.sync_batchnorm.
  std::unique_ptr<SyncBatchNorm> sync_batchnorm_;
};

// Overwrites every tensor of `tensors` (all on `device`) with rank 0's values in one collective:
// packed into one byte buffer, broadcast, unpacked, in `compute` order.
void broadcast_coalesced(GradientComm& comm, nn::NamedTensors& tensors, Device device, const Stream& compute);

}  // namespace cg::dist
