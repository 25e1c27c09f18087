// NCCL for CUDA gradients: collectives on the rank's communication stream (dist/comm_stream.h),
// watched by a CollectiveWatchdog that turns one that fails (NCCL's asynchronous error) or
// outlives dist.timeout_s into an error naming the rank and the operation, and aborts the
// communicator so that no stream waits forever. The next DDP call on the training thread throws.
#include <atomic>
#include <chrono>
#include <mutex>

#include "dist/comm_stream.h"
#include "dist/gradient_comm.h"
#include "dist/host_deadline.h"
#include "dist/nccl_api.h"
#include "util/check.h"

namespace cg::dist {
namespace {

std::string megabytes(size_t bytes) { return fmt::format("{:.1f} MB", double(bytes) / 1e6); }

class NcclComm : public GradientComm, public ShardCollectives, public Wire16Collectives {
 public:
  NcclComm(TcpStore& store, int rank, int world, Device d, double timeout_s, const std::string& key_prefix)
      : rank_(rank), world_(world) {
    CG_CHECK(d.is_cuda(), "NCCL needs CUDA tensors, the model is on {}", d.str());
    std::string id;
    if (rank == 0) {
      id = nccl::unique_id();
      store.set(key_prefix + "nccl/unique_id", id);
    } else {
      id = store.get_string(key_prefix + "nccl/unique_id");
    }
    {
      HostDeadline deadline(timeout_s, [rank, world, timeout_s] {
        exit_naming_cause(fmt::format(
            "rank {}: NCCL communicator setup (ncclCommInitRank and the first collectives, {} ranks) did not finish "
            "within {} s (dist.timeout_s): a peer stalled or died before joining",
            rank, world, timeout_s));
      });
      comm_ = nccl::init(id, world, rank, d.index);
      try {
        nccl::connect(comm_);
      } catch (...) {
        nccl::destroy(comm_);
        throw;
      }
    }
    CollectiveWatchdog::Options w;
    w.rank = rank;
    w.timeout_s = timeout_s;
    w.async_error = [this] { return nccl::async_error(comm_); };
    w.abort = [this] { abort(); };
    try {
      stream_ = std::make_unique<CommStream>(d, std::move(w));
    } catch (...) {
      nccl::destroy(comm_);
      throw;
    }
  }

  ~NcclComm() override {
    const bool failed = stream_->watchdog().failed();
    if (!failed) {
      try {
        stream_->stream().synchronize();  // nothing may still use the buffers or the communicator
      } catch (const std::exception&) {
      }
    }
    stream_.reset();  // the watchdog stops before the communicator goes
    if (!aborted_) nccl::destroy(comm_);  // ncclCommAbort already freed an aborted one
  }

  std::string name() const override { return fmt::format("nccl {}", nccl::version()); }
  int rank() const override { return rank_; }
  int size() const override { return world_; }

  std::shared_ptr<Work> all_reduce_average(Tensor& data, const Stream& compute, const std::string& what) override {
    std::lock_guard<std::timed_mutex> lock(issue_mutex_);
    auto work = stream_->begin(compute);  // throws once communication has failed
    nccl::all_reduce_average(comm_, data.data<float>(), data.numel(), stream_->stream().handle());
    stream_->end(work, "all_reduce", fmt::format("{}, {}", what, megabytes(data.nbytes())));
    return work;
  }

  void wait(Work& work, const Stream& compute) override { stream_->wait(work, compute); }

  void broadcast(Tensor& t, const Stream& compute) override {
    std::shared_ptr<Work> work;
    {
      std::lock_guard<std::timed_mutex> lock(issue_mutex_);
      work = stream_->begin(compute);
      nccl::broadcast(comm_, t.raw_data(), t.nbytes(), 0, stream_->stream().handle());
      stream_->end(work, "broadcast", fmt::format("{}, {}", t.str(), megabytes(t.nbytes())));
    }
    stream_->wait(*work, compute);
  }

  void watch_replay(const Stream& compute, const std::string& what) const override {
    stream_->watch_replay(compute, what);
  }
  void check_health() const override { stream_->check_health(); }

  void all_reduce_sum(double* data, int64_t count, const Stream& compute, const std::string& what) override {
    std::shared_ptr<Work> work;
    {
      std::lock_guard<std::timed_mutex> lock(issue_mutex_);
      work = stream_->begin(compute);
      nccl::all_reduce_sum_f64(comm_, data, count, stream_->stream().handle());
      stream_->end(work, "all_reduce", fmt::format("{}, {} doubles", what, count));
    }
    stream_->wait(*work, compute);
  }

  // ZeRO-1: NCCL's reduce-scatter wants equal shards, so a bucket is padded to world * shard.
  ShardCollectives* shards() override { return this; }
  std::vector<int64_t> shard_bounds(int64_t count) const override {
    const int64_t shard = (count + world_ - 1) / world_;
    std::vector<int64_t> bounds(size_t(world_) + 1);
    for (int r = 0; r <= world_; ++r) bounds[size_t(r)] = int64_t(r) * shard;
    return bounds;
  }
  std::shared_ptr<Work> reduce_scatter_average(Tensor& data, const Stream& compute, const std::string& what) override {
    const int64_t shard = shard_of(data.numel());
    std::lock_guard<std::timed_mutex> lock(issue_mutex_);
    auto work = stream_->begin(compute);
    nccl::reduce_scatter_average(comm_, data.data<float>(), shard, rank_, stream_->stream().handle());
    stream_->end(work, "reduce_scatter", fmt::format("{}, {}", what, megabytes(data.nbytes())));
    return work;
  }
  std::shared_ptr<Work> all_gather_shards(Tensor& data, const Stream& compute, const std::string& what) override {
    const int64_t shard = shard_of(data.numel());
    std::lock_guard<std::timed_mutex> lock(issue_mutex_);
    auto work = stream_->begin(compute);
    nccl::all_gather(comm_, data.raw_data(), size_t(shard) * itemsize(data.dtype()), rank_, stream_->stream().handle());
    stream_->end(work, "all_gather", fmt::format("{}, {}", what, megabytes(data.nbytes())));
    return work;
  }

  // The stages and NCCL's 16-bit sum all on the communication stream after the compute stream's
  // work: the compute stream neither waits nor runs the casts.
  Wire16Collectives* wire16() override { return this; }
  std::shared_ptr<Work> all_reduce_sum(Tensor& wire, const Stream& compute, const std::string& what,
                                       WireStages stages) override {
    return sum_16bit("all_reduce", wire, compute, what, stages, [&] {
      nccl::all_reduce_sum_16bit(comm_, wire.raw_data(), wire.numel(), wire.dtype() == DType::bf16,
                                 stream_->stream().handle());
    });
  }
  std::shared_ptr<Work> reduce_scatter_sum(Tensor& wire, const Stream& compute, const std::string& what,
                                           WireStages stages) override {
    const int64_t shard = shard_of(wire.numel());
    return sum_16bit("reduce_scatter", wire, compute, what, stages, [&] {
      nccl::reduce_scatter_sum_16bit(comm_, wire.raw_data(), shard, rank_, wire.dtype() == DType::bf16,
                                     stream_->stream().handle());
    });
  }

 private:
  template <typename Collective>
  std::shared_ptr<Work> sum_16bit(const char* op, const Tensor& wire, const Stream& compute, const std::string& what,
                                  const WireStages& stages, Collective collective) {
    std::lock_guard<std::timed_mutex> lock(issue_mutex_);
    auto work = stream_->begin(compute);  // throws once communication has failed
    {
      StreamGuard on_comm(stream_->stream());
      if (stages.before) stages.before();
      collective();
      if (stages.after) stages.after();
    }
    stream_->end(work, op, fmt::format("{}, {} {}", what, megabytes(wire.nbytes()), dtype_name(wire.dtype())));
    return work;
  }

  // On the watchdog's thread. Issuing holds issue_mutex_, so the communicator is never freed
  // under a call in progress; a call stuck inside NCCL for seconds gets aborted regardless, since
  // abort is what unblocks it.
  void abort() {
    const bool locked = issue_mutex_.try_lock_for(std::chrono::seconds(2));
    nccl::abort(comm_);
    aborted_ = true;
    if (locked) issue_mutex_.unlock();
  }

  int64_t shard_of(int64_t count) const {
    CG_CHECK(count % world_ == 0, "NCCL reduce-scatter/all-gather of {} floats: not padded to {} equal shards",
             count, world_);
    return count / world_;
  }

  int rank_, world_;
  nccl::Comm comm_ = nullptr;
  std::timed_mutex issue_mutex_;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<CommStream> stream_;  // last: its watchdog uses the members above
};

}  // namespace

std::unique_ptr<GradientComm> make_linked_nccl_comm(TcpStore& store, int rank, int world_size, Device device,
                                                    double timeout_s, const std::string& key_prefix) {
  return std::make_unique<NcclComm>(store, rank, world_size, device, timeout_s, key_prefix);
}

}  // namespace cg::dist
