#include "dist/bucketed_all_reduce.h"

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

}  // namespace cg::dist
