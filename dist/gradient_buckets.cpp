#include "dist/gradient_buckets.h"

#include <algorithm>
#include <numeric>

#include "dist/gradient_comm.h"
#include "util/check.h"

namespace cg::dist {
namespace {

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> r(n);
  std::iota(r.rbegin(), r.rend(), size_t(0));
  return r;
}

int64_t floats_in(double mb) { return int64_t(mb * 1024 * 1024 / sizeof(float)); }

}  // namespace

GradientBuckets::GradientBuckets(const nn::NamedTensors& params, const BucketOptions& options)
    : params_(params), options_(options) {
  CG_CHECK(!params_.empty(), "DDP: the model has no parameters");
  device_ = params_.front().second.device();
  lay_out(reverse_order(params_.size()));
}

// Every parameter and bucket starts at a multiple of kFlatAlignmentFloats; the padding is zeroed
// with the buffer, no gradient or parameter view covers it and the optimizer never steps it, so it
// is communicated as zeros and stays zero. Padded for shards or not, a gradient sits at the same
// place in its bucket and is summed in the same order by the ring: sharded training stays
// bit-identical to unsharded DDP.
void GradientBuckets::lay_out(const std::vector<size_t>& order) {
  buckets_.clear();
  bucket_of_.assign(params_.size(), 0);
  // The first bucket is the smaller of first_bucket_mb and the cap.
  int64_t offset = 0, cap = floats_in(std::min(options_.first_bucket_mb, options_.bucket_cap_mb));
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    current.count = offset - current.offset;
    current.padded = options_.pad ? options_.pad(current.count) : current.count;
    offset = current.offset + current.padded;
    buckets_.push_back(current);
    current = Bucket{};
    offset = align_to_flat(offset);
    current.offset = offset;
    cap = floats_in(options_.bucket_cap_mb);
  };
  std::vector<int64_t> offsets(params_.size());
  for (size_t i : order) {
    const int64_t n = params_[i].second.numel();
    if (!current.params.empty() && align_to_flat(offset) - current.offset + n > cap) close();
    offset = align_to_flat(offset);
    offsets[i] = offset;
    current.params.push_back(i);
    bucket_of_[i] = buckets_.size();
    offset += n;
  }
  close();
  // Keep any gradient already accumulated (a layout changes between steps, where it is zero, but
  // copying keeps the invariant simple).
  Tensor flat = Tensor::zeros({offset}, DType::f32, device_);
  if (flat_.defined()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor g = params_[i].second.grad();
      if (g.defined()) flat.view_at(offsets[i], g.shape()).copy_(g);
    }
  }
  flat_ = flat;
  flat_numel_ = offset;
  offsets_ = offsets;
  point_gradients_at_flat();
}

void GradientBuckets::point_gradients_at_flat() {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    p.set_grad(flat_.view_at(offsets_[i], p.shape()));
  }
}

void GradientBuckets::release() {
  CG_CHECK(!in_backward_, "DDP: the gradient buffer released inside a backward");
  for (auto& [name, p] : params_) p.impl().grad.reset();
  flat_ = Tensor();
}

void GradientBuckets::check_gradients_are_views() const {
  for (const auto& [name, p] : params_) {
    const Tensor g = p.grad();
    if (!g.defined() || g.impl().storage != flat_.impl().storage)
      throw Error(fmt::format(
          "DDP: the gradient of '{}' is no longer DDP's view of its flat gradient buffer (it was {}); with "
          "DistributedDataParallel, zero the gradients with DistributedDataParallel::reducer().zero_grad(), not the "
          "optimizer's or the module's zero_grad(), which free them",
          name, g.defined() ? "replaced" : "freed"));
  }
}

bool GradientBuckets::prepare(bool sync) {
  if (!flat_.defined()) {  // released after the last synced step (shard_grad_op)
    flat_ = Tensor::zeros({flat_numel_}, DType::f32, device_);
    point_gradients_at_flat();
  }
  check_gradients_are_views();  // the collectives read the flat buffer (checked before a new layout hides it)
  bool laid_out = false;
  if (!rebuilt_ && ready_order_.size() == params_.size()) {
    // Once, from the order gradients actually became ready, so buckets fill in sequence.
    lay_out(ready_order_);
    rebuilt_ = laid_out = true;
  }
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  ready_.assign(params_.size(), 0);
  sync_backward_ = sync;
  in_backward_ = true;
  return laid_out;
}

std::optional<size_t> GradientBuckets::ready(size_t param) {
  if (!sync_backward_ || !in_backward_) return std::nullopt;
  if (!rebuilt_ && ready_order_.size() < params_.size()) ready_order_.push_back(param);
  ready_[param] = 1;
  const size_t b = bucket_of_[param];
  CG_CHECK(buckets_[b].pending > 0, "DDP: parameter '{}' got its gradient twice in one backward", params_[param].first);
  if (--buckets_[b].pending > 0) return std::nullopt;
  return b;
}

bool GradientBuckets::finish_backward() {
  in_backward_ = false;
  if (!sync_backward_) return false;
  check_every_gradient_arrived(params_, ready_, "bucket was never all-reduced");
  return true;
}

void check_every_gradient_arrived(const nn::NamedTensors& params, const std::vector<char>& ready,
                                  const std::string& what) {
  std::vector<std::string> missing;
  for (size_t i = 0; i < params.size(); ++i)
    if (!ready[i]) missing.push_back(params[i].first);
  if (!missing.empty())
    throw Error(fmt::format("DDP: no gradient reached {} (unused in the forward pass?); its {}",
                            fmt::join(missing, ", "), what));
}

std::vector<int64_t> GradientBuckets::sizes() const {
  std::vector<int64_t> out;
  for (const auto& b : buckets_) out.push_back(b.count);
  return out;
}

std::vector<std::shared_ptr<Work>> GradientBuckets::works() const {
  std::vector<std::shared_ptr<Work>> out;
  for (const auto& b : buckets_) out.push_back(b.work);
  return out;
}

std::string GradientBuckets::wire_label() const {
  if (options_.wire == DType::f32) return "float32";
  return options_.wire == DType::f16 ? "fp16 compressed" : "bf16 compressed";
}

std::vector<size_t> GradientBuckets::bytes_per_bucket() const {
  std::vector<size_t> out;
  for (const auto& b : buckets_) out.push_back(size_t(b.count) * itemsize(options_.wire));
  return out;
}

size_t GradientBuckets::bytes_per_step() const {
  size_t total = 0;
  for (size_t bytes : bytes_per_bucket()) total += bytes;
  return total;
}

double modeled_ms_per_step(const GradientBuckets& buckets, const GradientComm& comm) {
  double total = 0;
  for (size_t bytes : buckets.bytes_per_bucket()) total += comm.modeled_ms(bytes);
  return total;
}

}  // namespace cg::dist
