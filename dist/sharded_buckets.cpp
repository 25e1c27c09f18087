// ZeRO-1 and ZeRO-2 (sharded_buckets.h): which elements a rank owns, the optimizer cut to them, the buckets'
// collectives and the parameters' all-gather after the step (the optimizer state gathered back
// whole for checkpoints: sharded_state.cpp). Rule: a rank owns shard rank() of every bucket
// (ShardCollectives::shard_bounds), so the reduce-scatter leaves exactly the gradients it updates,
// and the all-gather exactly the parameters the others updated.
#include "dist/sharded_buckets.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "util/check.h"
#include "util/nvtx.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

// Buckets padded as the transport's shards need.
BucketOptions padded_for(BucketOptions options, ShardCollectives& shards) {
  options.pad = [&shards](int64_t count) { return shards.shard_bounds(count).back(); };
  return options;
}

}  // namespace

ShardedBuckets::ShardedBuckets(const nn::NamedTensors& params, GradientComm& transport, GradientComm& bucket_comm,
                               BucketOptions options, Sharding strategy)
    : transport_(transport),
      bucket_comm_(bucket_comm),
      shards_(require_shard_collectives(transport, std::string("dist.sharding=") + enum_name(strategy))),
      buckets_(params, padded_for(std::move(options), shards_)),
      shard_gradients_(strategy == Sharding::shard_grad_op) {
  CG_CHECK(strategy == Sharding::optimizer || strategy == Sharding::shard_grad_op,
           "ShardedBuckets serves dist.sharding=optimizer and shard_grad_op, not {}", enum_name(strategy));
  lay_out_parameters();
}

ShardedBuckets::~ShardedBuckets() {
  for (auto& w : gathers_) {  // the communication thread may still write into flat_params_
    if (!w) continue;
    try {
      transport_.wait(*w, current_stream(buckets_.device()));
    } catch (const std::exception&) {  // reported by whoever waited first, or moot now
    }
  }
}

// The parameters move into one flat buffer laid out as the gradients' (each at an aligned
// offset, the padding zero): the all-gather then writes them in place, bucket by bucket. Each
// parameter keeps its identity (the module, the optimizer and autograd hold it).
void ShardedBuckets::lay_out_parameters() {
  autograd::NoGradGuard no_grad;
  Tensor flat = Tensor::zeros({buckets_.flat().numel()}, DType::f32, buckets_.device());
  const nn::NamedTensors& params = buckets_.params();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i].second;
    CG_CHECK(p.dtype() == DType::f32, "DDP dist.sharding: parameter '{}' is {}, float32 expected", params[i].first,
             p.str());
    p.relocate_to(flat.view_at(buckets_.offsets()[i], p.shape()));
  }
  flat_params_ = flat;
}

void ShardedBuckets::attach(nn::Optimizer& optimizer) {
  CG_CHECK(!sharding_active_, "DDP: attach the optimizer before the first forward");
  optimizer_ = &optimizer;
}

void ShardedBuckets::prepare_for_backward(bool sync) {
  CG_CHECK(optimizer_, "DDP with dist.sharding={}: attach(optimizer) before the first forward",
           shard_gradients_ ? "shard_grad_op" : "optimizer");
  wait_for_parameters();
  if (buckets_.prepare(sync)) start_sharding();
}

// After the first synced step (all ranks updated everything alike) and the new layout: from now
// on the optimizer keeps this rank's shards only; the state it has is cut down to them.
void ShardedBuckets::start_sharding() {
  lay_out_parameters();
  std::vector<nn::Optimizer::Slice> slices;
  const std::vector<OwnedSpan> spans = owned_spans();
  int64_t shard_elements = 0;
  for (const OwnedSpan& s : spans) shard_elements = std::max(shard_elements, s.shard_offset + s.count);
  if (shard_gradients_) gradient_shards_ = Tensor::zeros({shard_elements}, DType::f32, buckets_.device());
  const nn::NamedTensors& params = buckets_.params();
  for (const OwnedSpan& s : spans) {
    const Tensor grad = shard_gradients_ ? gradient_shards_.view_at(s.shard_offset, {s.count})
                                         : buckets_.flat().view_at(s.flat_begin, {s.count});
    slices.push_back({.name = params[s.param].first,
                      .range = {s.flat_begin - buckets_.offsets()[s.param], s.count},
                      .param = flat_params_.view_at(s.flat_begin, {s.count}),
                      .grad = grad});
  }
  optimizer_->shard(std::move(slices));
  sharding_active_ = true;
}

void ShardedBuckets::gradient_ready(size_t param) {
  const std::optional<size_t> complete = buckets_.ready(param);
  if (!complete) return;
  CG_NVTX_RANGE("DDP all-reduce issue");
  GradientBuckets::Bucket& b = buckets_[*complete];
  const Stream s = current_stream(buckets_.device());
  const std::string what = fmt::format("bucket {}", *complete);
  if (sharding_active_) {
    Tensor bucket = buckets_.flat().view_at(b.offset, {b.padded});
    b.work = bucket_comm_.shards()->reduce_scatter_average(bucket, s, what);
  } else {
    Tensor bucket = buckets_.flat().view_at(b.offset, {b.count});
    b.work = bucket_comm_.all_reduce_average(bucket, s, what);
  }
}

void ShardedBuckets::wait_for_gradients() {
  if (!buckets_.finish_backward()) return;
  const Stream s = current_stream(buckets_.device());
  for (size_t b = 0; b < buckets_.size(); ++b) bucket_comm_.wait(*buckets_[b].work, s);
  if (sharding_active_ && shard_gradients_) keep_gradient_shards();
}

// shard_grad_op: this rank's reduced shards into their own buffer (spans of one bucket are
// contiguous there as in the flat buffer), then the whole gradients go.
void ShardedBuckets::keep_gradient_shards() {
  autograd::NoGradGuard no_grad;
  for (const OwnedSpan& s : owned_spans())
    gradient_shards_.view_at(s.shard_offset, {s.count}).copy_(buckets_.flat().view_at(s.flat_begin, {s.count}));
  buckets_.release();
}

void ShardedBuckets::zero_grad() {
  buckets_.zero();
  if (gradient_shards_.defined()) gradient_shards_.zero_();
}

// This rank owns shard rank() of every bucket; the parameters' parts of it, bucket by bucket.
// The alignment padding between parameters (and a bucket's shard padding) belongs to none.
std::vector<ShardedBuckets::OwnedSpan> ShardedBuckets::owned_spans() const {
  std::vector<OwnedSpan> out;
  const int me = transport_.rank();
  const nn::NamedTensors& params = buckets_.params();
  const std::vector<int64_t>& offset = buckets_.offsets();
  int64_t shard_offset = 0;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const GradientBuckets::Bucket& b = buckets_[k];
    const std::vector<int64_t> bounds = shards_.shard_bounds(b.count);
    const int64_t lo = b.offset + bounds[size_t(me)], hi = b.offset + bounds[size_t(me) + 1];
    for (size_t i : b.params) {
      const int64_t begin = std::max(lo, offset[i]);
      const int64_t end = std::min(hi, offset[i] + params[i].second.numel());
      if (end > begin) out.push_back({i, begin, end - begin, shard_offset + (begin - lo)});
    }
    shard_offset += hi - lo;
  }
  return out;
}

std::map<std::string, nn::Optimizer::Range> ShardedBuckets::owned_ranges() const {
  std::map<std::string, nn::Optimizer::Range> out;
  for (const OwnedSpan& s : owned_spans())
    out[buckets_.params()[s.param].first] = {s.flat_begin - buckets_.offsets()[s.param], s.count};
  return out;
}

void ShardedBuckets::start_parameter_gather() {
  if (!sharding_active_) return;
  CG_NVTX_RANGE("DDP all-gather issue");
  gathers_.clear();
  const Stream s = current_stream(buckets_.device());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Tensor bucket = flat_params_.view_at(buckets_[i].offset, {buckets_[i].padded});
    gathers_.push_back(shards_.all_gather_shards(bucket, s, fmt::format("parameters of bucket {}", i)));
  }
  gathers_pending_ = true;
}

void ShardedBuckets::wait_for_parameters() {
  if (!gathers_pending_) return;
  trace::Span span("wait for all-gathers", "compute");
  gathers_pending_ = false;
  for (auto& w : gathers_) transport_.wait(*w, current_stream(buckets_.device()));
}

int64_t ShardedBuckets::total_elements() const {
  int64_t n = 0;
  for (const auto& [name, p] : buckets_.params()) n += p.numel();
  return n;
}

int64_t ShardedBuckets::owned_elements() const {
  int64_t n = 0;
  for (const OwnedSpan& s : owned_spans()) n += s.count;
  return n;
}

Reducer::Resident ShardedBuckets::resident_bytes() const {
  Resident r;
  r.parameters = int64_t(flat_params_.nbytes());
  if (buckets_.flat().defined()) r.gradients += int64_t(buckets_.flat().nbytes());
  if (gradient_shards_.defined()) r.gradients += int64_t(gradient_shards_.nbytes());
  if (optimizer_) r.optimizer_state = optimizer_->state_bytes();
  return r;
}

std::string ShardedBuckets::describe() const {
  return fmt::format("{} gradient buckets, {} bytes reduce-scattered per step ({}) and {} bytes of parameters "
                     "all-gathered (float32), from the second step on (the first is all-reduced); this rank keeps "
                     "{} of {} elements' optimizer state{}",
                     buckets_.size(), buckets_.bytes_per_step(), buckets_.wire_label(),
                     gather_bytes_per_step(), owned_elements(), total_elements(),
                     shard_gradients_ ? " and gradients between steps" : "");
}

size_t ShardedBuckets::gather_bytes_per_step() const {
  size_t total = 0;
  for (int64_t count : buckets_.sizes()) total += size_t(count) * sizeof(float);
  return total;
}

}  // namespace cg::dist
