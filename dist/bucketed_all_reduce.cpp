#include "dist/bucketed_all_reduce.h"

#include "util/check.h"
#include "util/nvtx.h"

namespace cg::dist {

BucketedAllReduce::BucketedAllReduce(const nn::NamedTensors& params, GradientComm& comm, const BucketOptions& options)
    : comm_(comm), buckets_(params, options) {}

void BucketedAllReduce::gradient_ready(size_t param) {
  const std::optional<size_t> complete = buckets_.ready(param);
  if (!complete) return;
  CG_NVTX_RANGE("DDP all-reduce issue");
  GradientBuckets::Bucket& b = buckets_[*complete];
  Tensor bucket = buckets_.flat().view_at(b.offset, {b.count});
  b.work = comm_.all_reduce_average(bucket, current_stream(buckets_.device()), fmt::format("bucket {}", *complete));
}

void BucketedAllReduce::wait_for_gradients() {
  if (!buckets_.finish_backward()) return;
  const Stream s = current_stream(buckets_.device());
  for (size_t b = 0; b < buckets_.size(); ++b) comm_.wait(*buckets_[b].work, s);
}

nn::NamedTensors BucketedAllReduce::full_optimizer_state() {
  CG_CHECK(optimizer_, "DDP: attach the optimizer before asking for its state");
  return optimizer_->state_tensors();  // whole and equal on every rank
}

Reducer::Resident BucketedAllReduce::resident_bytes() const {
  Resident r;
  for (const auto& [name, p] : buckets_.params()) r.parameters += int64_t(p.nbytes());
  r.gradients = int64_t(buckets_.flat().nbytes());
  if (optimizer_) r.optimizer_state = optimizer_->state_bytes();
  return r;
}

std::string BucketedAllReduce::describe() const {
  return fmt::format("{} gradient buckets, {} bytes all-reduced per step ({})", buckets_.size(),
                     buckets_.bytes_per_step(), buckets_.wire_label());
}

}  // namespace cg::dist
