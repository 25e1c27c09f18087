#include "dist/ddp.h"

#include <algorithm>
#include <numeric>

#include "engine/autograd/grad_mode.h"
#include "engine/device_copy.h"
#include "util/check.h"
#include "util/nvtx.h"

namespace cg::dist {
namespace {

// The next offset (in floats) at which a parameter may start: see kFlatAlignmentBytes.
int64_t align_up(int64_t offset) {
  return (offset + kFlatAlignmentFloats - 1) / kFlatAlignmentFloats * kFlatAlignmentFloats;
}

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> r(n);
  std::iota(r.rbegin(), r.rend(), size_t(0));
  return r;
}

}  // namespace

void broadcast_coalesced(GradientComm& comm, nn::NamedTensors& tensors, Device device, const Stream& compute) {
  size_t total = 0;
  for (auto& [name, t] : tensors) {
    CG_CHECK(t.device() == device, "DDP: '{}' is {}, the parameters are on {}", name, t.str(), device.str());
    total += t.nbytes();
  }
  if (total == 0 || !comm.broadcast_moves_data()) return;
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
    : model_(model), comm_(std::move(comm)), options_(options), params_(model.named_parameters()) {
  CG_CHECK(!params_.empty(), "DDP: the model has no parameters");
  device_ = params_.front().second.device();
  if (options_.grad_compression != GradCompression::none && !comm_->why_no_compression().empty())
    throw UsageError(fmt::format("dist.grad_compression={}: {}", enum_name(options_.grad_compression),
                                 comm_->why_no_compression()));
  {
    autograd::NoGradGuard no_grad;
    nn::NamedTensors state = model.state_dict();  // replicas start from rank 0's weights and buffers
    broadcast_coalesced(*comm_, state, device_, current_stream(device_));
  }
  if (options_.sync_batchnorm) sync_batchnorm_ = std::make_unique<SyncBatchNorm>(model_, *comm_);
  build_buckets(reverse_order(params_.size()));
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].second.register_grad_ready_hook([this, i](Tensor&) { on_gradient_ready(i); });
}

void DistributedDataParallel::build_buckets(const std::vector<size_t>& order) {
  // Lay the flat buffer out in bucket order, so each bucket is one contiguous slice. Every
  // parameter and bucket starts at a multiple of kFlatAlignmentFloats; the padding is zeroed with
  // the buffer, no gradient or parameter view covers it and the optimizer never steps it, so it
  // is all-reduced (reduce-scattered, all-gathered) as zeros and stays zero. Sharded or not, the
  // layout is the same, so a gradient sits at the same place in its bucket and is summed in the
  // same order by the ring: sharded training stays bit-identical to unsharded DDP.
  buckets_.clear();
  bucket_of_.assign(params_.size(), 0);
  // The first bucket is the smaller of first_bucket_mb and the cap.
  int64_t offset = 0,
          cap = int64_t(std::min(options_.first_bucket_mb, options_.bucket_cap_mb) * 1024 * 1024 / sizeof(float));
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    current.count = offset - current.offset;
    current.padded = current.count;
    if (options_.zero_sharding) {  // the transport's shards may need the bucket padded
      current.padded = comm_->shard_bounds(current.count).back();
      offset = current.offset + current.padded;
    }
    buckets_.push_back(current);
    current = Bucket{};
    offset = align_up(offset);
    current.offset = offset;
    cap = int64_t(options_.bucket_cap_mb * 1024 * 1024 / sizeof(float));
  };
  std::vector<int64_t> offsets(params_.size());
  for (size_t i : order) {
    const int64_t n = params_[i].second.numel();
    if (!current.params.empty() && align_up(offset) - current.offset + n > cap) close();
    offset = align_up(offset);
    offsets[i] = offset;
    current.params.push_back(i);
    bucket_of_[i] = buckets_.size();
    offset += n;
  }
  close();
  // Keep any gradient already accumulated (a rebuild happens between steps, where it is zero,
  // but copying keeps the invariant simple).
  Tensor flat = Tensor::zeros({offset}, DType::f32, device_);
  if (flat_.defined()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor g = params_[i].second.grad();
      if (g.defined()) flat.view_at(offsets[i], g.shape()).copy_(g);
    }
  }
  flat_ = flat;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    p.set_grad(flat_.view_at(offsets[i], p.shape()));
  }
  if (options_.grad_compression != GradCompression::none)  // once per layout (twice in a run); padded for ZeRO-1
    for (Bucket& b : buckets_)
      b.compressed = Tensor::empty({b.padded}, wire_dtype(options_.grad_compression), device_);
  param_offset_ = offsets;
  if (options_.zero_sharding) lay_out_parameters(offsets);
}

// The parameters move into one flat buffer laid out as the gradients' (each at an aligned offset,
// the padding zero): the all-gather then writes them in place, bucket by bucket. Each parameter
// keeps its TensorImpl (the module, the optimizer and autograd hold it); only its storage
// changes, to a view of the flat buffer.
void DistributedDataParallel::lay_out_parameters(const std::vector<int64_t>& offsets) {
  autograd::NoGradGuard no_grad;
  Tensor flat = Tensor::zeros({flat_.numel()}, DType::f32, device_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    CG_CHECK(p.dtype() == DType::f32, "DDP zero_sharding: parameter '{}' is {}, float32 expected", params_[i].first,
             p.str());
    flat.view_at(offsets[i], p.shape()).copy_(p);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    TensorImpl& impl = params_[i].second.impl();
    impl.storage = flat.impl().storage;
    impl.offset = flat.impl().offset + offsets[i];
  }
  flat_params_ = flat;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(&ddp) {
  CG_CHECK(!ddp.no_sync_, "DDP: no_sync() guards do not nest; one is alive already");
  ddp.no_sync_ = true;
}

DistributedDataParallel::NoSync::~NoSync() {
  if (ddp_) ddp_->no_sync_ = false;
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  CG_CHECK(!options_.zero_sharding || optimizer_, "DDP with zero_sharding: attach(optimizer) before the first forward");
  wait_for_parameters();
  prepare_for_backward();
  return model_(input);
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers) return;
  autograd::NoGradGuard no_grad;
  nn::NamedTensors buffers = model_.named_buffers();
  broadcast_coalesced(*comm_, buffers, device_, current_stream(device_));
}

void DistributedDataParallel::check_gradients_are_views() const {
  for (const auto& [name, p] : params_) {
    const Tensor g = p.grad();
    if (!g.defined() || g.impl().storage != flat_.impl().storage)
      throw Error(fmt::format(
          "DDP: the gradient of '{}' is no longer DDP's view of its flat gradient buffer (it was {}); with "
          "DistributedDataParallel, zero the gradients with DistributedDataParallel::zero_grad(), not the "
          "optimizer's or the module's zero_grad(), which free them",
          name, g.defined() ? "replaced" : "freed"));
  }
}

void DistributedDataParallel::prepare_for_backward() {
  sync_buffers();
  check_gradients_are_views();  // the all-reduces read the flat buffer (checked before a rebuild hides it)
  if (!rebuilt_ && ready_order_.size() == params_.size()) {
    // Rebuild once from the order gradients actually became ready, so buckets fill in sequence.
    build_buckets(ready_order_);
    rebuilt_ = true;
    if (options_.zero_sharding) activate_sharding();
  }
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  ready_.assign(params_.size(), 0);
  sync_backward_ = !no_sync_;
  in_backward_ = true;
}

void DistributedDataParallel::on_gradient_ready(size_t param) {
  if (!sync_backward_ || !in_backward_) return;
  if (!rebuilt_ && ready_order_.size() < params_.size()) ready_order_.push_back(param);
  ready_[param] = 1;
  Bucket& b = buckets_[bucket_of_[param]];
  CG_CHECK(b.pending > 0, "DDP: parameter '{}' got its gradient twice in one backward", params_[param].first);
  if (--b.pending == 0) {
    CG_NVTX_RANGE("DDP all-reduce issue");
    const std::string what = fmt::format("bucket {}", bucket_of_[param]);
    if (sharding_active_ && b.compressed.defined()) {
      Tensor bucket = flat_.view_at(b.offset, {b.padded});
      b.work = comm_->reduce_scatter_compressed(bucket, b.compressed, current_stream(device_), what);
    } else if (sharding_active_) {
      b.work = comm_->reduce_scatter_average(flat_.data<float>() + b.offset, b.padded, current_stream(device_), what);
    } else if (b.compressed.defined()) {
      Tensor bucket = flat_.view_at(b.offset, {b.count}), wire = b.compressed.view_at(0, {b.count});
      b.work = comm_->all_reduce_compressed(bucket, wire, current_stream(device_), what);
    } else {
      b.work = comm_->all_reduce_average(flat_.data<float>() + b.offset, b.count, current_stream(device_), what);
    }
  }
}

void DistributedDataParallel::wait_for_gradients() {
  in_backward_ = false;
  if (!sync_backward_) return;
  std::vector<std::string> missing;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) missing.push_back(params_[i].first);
  if (!missing.empty())
    throw Error(fmt::format("DDP: no gradient reached {} (unused in the forward pass?); its bucket was never "
                            "all-reduced", fmt::join(missing, ", ")));
  for (auto& b : buckets_) comm_->wait(*b.work, current_stream(device_));
}

void DistributedDataParallel::zero_grad() { flat_.zero_(); }

void DistributedDataParallel::attach(nn::GradScaler& scaler) {
  scaler.set_overflow_agreement([this](Tensor& found_inf) { agree_on_overflow(found_inf); });
}

void DistributedDataParallel::agree_on_overflow(Tensor& found_inf) {
  CG_CHECK(found_inf.numel() == 1 && found_inf.dtype() == DType::f32 && found_inf.device() == device_,
           "DDP: found_inf {} must be one float32 on {}", found_inf.str(), device_.str());
  const Stream s = current_stream(device_);
  auto work = comm_->all_reduce_average(found_inf.data<float>(), 1, s, "found_inf");
  comm_->wait(*work, s);
}

std::vector<int64_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<int64_t> out;
  for (const auto& b : buckets_) out.push_back(b.count);
  return out;
}

std::vector<size_t> DistributedDataParallel::bucket_bytes_per_step() const {
  std::vector<size_t> out;
  for (const auto& b : buckets_) out.push_back(size_t(b.count) * itemsize(wire_dtype(options_.grad_compression)));
  return out;
}

size_t DistributedDataParallel::gather_bytes_per_step() const {
  if (!options_.zero_sharding) return 0;
  size_t total = 0;
  for (const auto& b : buckets_) total += size_t(b.count) * sizeof(float);
  return total;
}

size_t DistributedDataParallel::bytes_per_step() const {
  size_t total = 0;
  for (size_t bytes : bucket_bytes_per_step()) total += bytes;
  return total;
}

double DistributedDataParallel::modeled_ms_per_step() const {
  double total = 0;
  for (size_t bytes : bucket_bytes_per_step()) total += comm_->modeled_ms(bytes);
  return total;
}

std::vector<std::shared_ptr<Work>> DistributedDataParallel::last_all_reduces() const {
  std::vector<std::shared_ptr<Work>> out;
  for (const auto& b : buckets_) out.push_back(b.work);
  return out;
}

}  // namespace cg::dist
