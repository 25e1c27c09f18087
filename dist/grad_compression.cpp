// The 16-bit decorator over a transport (grad_compression.h): divide and cast before the
// transport's 16-bit sum, cast back after it, in the collective's own order (WireStages).
#include "dist/grad_compression.h"

#include "dist/gradient_comm.h"
#include "engine/compress_ops.h"
#include "util/check.h"

namespace cg::dist {
namespace {

class CompressedComm : public GradientComm, public ShardCollectives {
 public:
  CompressedComm(GradientComm& transport, GradCompression compression)
      : transport_(transport), wire_dtype_(wire_dtype(compression)), sum_(transport.wire16()) {
    if (!sum_)
      throw UsageError(fmt::format("dist.grad_compression={}: {}", enum_name(compression), transport.why_no_wire16()));
  }

  std::string name() const override { return transport_.name(); }
  int rank() const override { return transport_.rank(); }
  int size() const override { return transport_.size(); }
  void wait(Work& work, const Stream& compute) override { transport_.wait(work, compute); }
  void broadcast(Tensor& t, const Stream& compute) override { transport_.broadcast(t, compute); }
  void all_reduce_sum(double* data, int64_t count, const Stream& compute, const std::string& what) override {
    transport_.all_reduce_sum(data, count, compute, what);
  }
  double modeled_ms(size_t bytes) const override { return transport_.modeled_ms(bytes); }
  void watch_replay(const Stream& compute, const std::string& what) const override {
    transport_.watch_replay(compute, what);
  }
  void check_health() const override { transport_.check_health(); }

  // The float32 `bucket` divided by size() and cast into its 16-bit mirror, summed there, and
  // cast back. `bucket` is scratch until the work is waited for.
  std::shared_ptr<Work> all_reduce_average(Tensor& bucket, const Stream& compute, const std::string& what) override {
    Tensor wire = mirror_of(bucket);
    const int world = size();
    WireStages stages{[bucket, wire, world]() mutable { ops::compress_gradients(bucket, wire, world); },
                      [bucket, wire]() mutable { ops::decompress_gradients(wire, bucket); }};
    return sum_->all_reduce_sum(wire, compute, what, std::move(stages));
  }

  ShardCollectives* shards() override { return transport_.shards() ? this : nullptr; }
  std::vector<int64_t> shard_bounds(int64_t count) const override { return transport_.shards()->shard_bounds(count); }
  // The whole (padded) bucket divided and cast, the 16-bit reduce-scatter, and this rank's shard
  // cast back: the bits the compressed all-reduce leaves there (the rest of `bucket` is scratch).
  std::shared_ptr<Work> reduce_scatter_average(Tensor& bucket, const Stream& compute,
                                               const std::string& what) override {
    Tensor wire = mirror_of(bucket);
    const std::vector<int64_t> bounds = shard_bounds(bucket.numel());
    const int64_t lo = bounds[size_t(rank())], n = bounds[size_t(rank()) + 1] - lo;
    const int world = size();
    WireStages stages{[bucket, wire, world]() mutable { ops::compress_gradients(bucket, wire, world); },
                      [shard = bucket.view_at(lo, {n}), mine = wire.view_at(lo, {n}), n]() mutable {
                        if (n > 0) ops::decompress_gradients(mine, shard);
                      }};
    std::shared_ptr<Work> work = sum_->reduce_scatter_sum(wire, compute, what, std::move(stages));
    if (!work)
      throw UsageError(fmt::format("dist.sharding (optimizer or shard_grad_op) with dist.grad_compression: the {} "
                                   "transport has no 16-bit reduce-scatter; use gloo on the CPU, nccl on GPUs of their own, or the "
                                   "modeled backend",
                                   name()));
    return work;
  }
  // Parameters travel in float32.
  std::shared_ptr<Work> all_gather_shards(Tensor& data, const Stream& compute, const std::string& what) override {
    return transport_.shards()->all_gather_shards(data, compute, what);
  }

 private:
  // The 16-bit slice at `bucket`'s place in a mirror of the float32 buffer it is a slice of.
  Tensor mirror_of(const Tensor& bucket) {
    const std::shared_ptr<Storage>& storage = bucket.impl().storage;
    if (mirrored_.lock() != storage) {
      const int64_t floats = int64_t(storage->nbytes() / sizeof(float));
      mirror_ = Tensor::empty({floats}, wire_dtype_, bucket.device());
      mirrored_ = storage;
    }
    return mirror_.view_at(bucket.impl().offset, {bucket.numel()});
  }

  GradientComm& transport_;
  DType wire_dtype_;
  Wire16Collectives* sum_;
  std::weak_ptr<Storage> mirrored_;
  Tensor mirror_;
};

}  // namespace

std::unique_ptr<GradientComm> make_compressed_comm(GradientComm& transport, GradCompression compression) {
  CG_CHECK(compression != GradCompression::none, "make_compressed_comm: dist.grad_compression=none compresses nothing");
  return std::make_unique<CompressedComm>(transport, compression);
}

}  // namespace cg::dist
