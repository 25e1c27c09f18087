#include "dist/ddp.h"

#include "dist/bucketed_all_reduce.h"
#include "dist/sharded_buckets.h"
#include "engine/autograd/grad_mode.h"
#include "engine/device_copy.h"
#include "util/check.h"

namespace cg::dist {

void broadcast_coalesced(GradientComm& comm, nn::NamedTensors& tensors, Device device, const Stream& compute) {
  size_t total = 0;
  for (auto& [name, t] : tensors) {
    CG_CHECK(t.device() == device, "DDP: '{}' is {}, the parameters are on {}", name, t.str(), device.str());
    total += t.nbytes();
  }
  if (total == 0) return;
  Tensor packed = Tensor::empty({int64_t(total)}, DType::u8, device);
  char* base = static_cast<char*>(packed.raw_data());
  size_t offset = 0;
  for (auto& [name, t] : tensors) {  // GPU to GPU copies run in the current (compute) stream's order
    copy_bytes(base + offset, device, t.raw_data(), device, t.nbytes());
    offset += t.nbytes();
  }
  comm.broadcast(packed, compute);
  offset = 0;
  for (auto& [name, t] : tensors) {
    copy_bytes(t.raw_data(), device, base + offset, device, t.nbytes());
    offset += t.nbytes();
  }
}

DistributedDataParallel::DistributedDataParallel(nn::Module& model, ProcessGroup& group,
                                                 const DdpOptions& options)
    : DistributedDataParallel(model, make_host_gloo_comm(group), options) {}

DistributedDataParallel::DistributedDataParallel(nn::Module& model, std::unique_ptr<GradientComm> comm,
                                                 const DdpOptions& options)
    : model_(model), comm_(std::move(comm)), options_(options) {
  nn::NamedTensors params = model.named_parameters();
  CG_CHECK(!params.empty(), "DDP: the model has no parameters");
  device_ = params.front().second.device();
  if (options_.grad_compression != GradCompression::none)
    compressed_ = make_compressed_comm(*comm_, options_.grad_compression);
  {
    autograd::NoGradGuard no_grad;
    nn::NamedTensors state = model.state_dict();  // replicas start from rank 0's weights and buffers
    broadcast_coalesced(*comm_, state, device_, current_stream(device_));
  }
  GradientComm& bucket_comm = compressed_ ? *compressed_ : *comm_;
  BucketOptions buckets;
  buckets.bucket_cap_mb = options_.bucket_cap_mb;
  buckets.first_bucket_mb = options_.first_bucket_mb;
  buckets.wire = wire_dtype(options_.grad_compression);
  const UnitPolicy none = [](const std::string&, nn::Module&) { return false; };
  const UnitPolicy& units = options_.shard_units ? options_.shard_units : none;
  if (options_.param_dtype != ParamDType::float32 && !gathers_parameters(options_.sharding))
    throw UsageError(fmt::format("DDP: dist.param_dtype={} is the type full_shard and hybrid_shard gather parameters "
                                 "in; dist.sharding={} keeps them whole",
                                 enum_name(options_.param_dtype), enum_name(options_.sharding)));
  const DType param_dtype = gather_dtype(options_.param_dtype);
  if (options_.sharding == Sharding::full_shard) {
    reducer_ = std::make_unique<FullShard>(model, *comm_, bucket_comm, units, nullptr, param_dtype);
  } else if (options_.sharding == Sharding::hybrid_shard) {
    if (!options_.hybrid_node) throw UsageError("DDP: dist.sharding=hybrid_shard needs its node's transport");
    if (compressed_) throw UsageError("DDP: dist.sharding=hybrid_shard reduces in float32; dist.grad_compression is not built for it");
    reducer_ = std::make_unique<FullShard>(model, *options_.hybrid_node, *options_.hybrid_node, units,
                                           options_.hybrid_replicas, param_dtype);
  } else if (shards_optimizer(options_.sharding))
    reducer_ = std::make_unique<ShardedBuckets>(params, *comm_, bucket_comm, buckets, options_.sharding);
  else
    reducer_ = std::make_unique<BucketedAllReduce>(params, bucket_comm, buckets);
  for (size_t i = 0; i < params.size(); ++i)
    params[i].second.register_grad_ready_hook([this, i](Tensor&) { reducer_->gradient_ready(i); });
}

DistributedDataParallel::~DistributedDataParallel() = default;

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(&ddp) {
  CG_CHECK(!ddp.no_sync_, "DDP: no_sync() guards do not nest; one is alive already");
  ddp.no_sync_ = true;
}

DistributedDataParallel::NoSync::~NoSync() {
  if (ddp_) ddp_->no_sync_ = false;
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  reducer_->prepare_for_backward(!no_sync_);
  sync_buffers();
  return model_(input);
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers) return;
  autograd::NoGradGuard no_grad;
  nn::NamedTensors buffers = model_.named_buffers();
  broadcast_coalesced(*comm_, buffers, device_, current_stream(device_));
}

}  // namespace cg::dist
