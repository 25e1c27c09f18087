// The Gloo-based and modeled GradientComm backends, and the ring all-reduce cost model.
#include "dist/gradient_comm.h"

#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/comm_stream.h"
#include "dist/nccl_api.h"
#include "dist/serial_worker.h"
#include "dist/staging_buffers.h"
#include "engine/device_copy.h"
#include "engine/runtime.h"
#include "util/check.h"
#include "util/nvtx.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

// CPU tensors: Gloo straight on the buffer, on the process group's communication thread.
class HostGlooComm : public GradientComm, public ShardCollectives, public Wire16Collectives {
 public:
  explicit HostGlooComm(ProcessGroup& g) : group_(g) {}
  std::string name() const override { return "gloo"; }
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(double* data, int64_t count, const Stream&, const std::string& what) override {
    trace::Span span(fmt::format("{} ({} doubles)", what, count), "communication");
    group_.all_reduce(data, count);  // in issue order behind the buckets already queued
  }
  std::shared_ptr<Work> all_reduce_average(Tensor& data, const Stream&, const std::string&) override {
    return group_.all_reduce_async(data.data<float>(), data.numel(), ReduceOp::average);
  }
  void wait(Work& work, const Stream&) override { work.wait(); }
  void broadcast(Tensor& t, const Stream&) override { group_.broadcast(t.raw_data(), t.nbytes(), 0); }

  ShardCollectives* shards() override { return this; }
  std::vector<int64_t> shard_bounds(int64_t count) const override { return ring_shard_bounds(count, group_.size()); }
  std::shared_ptr<Work> reduce_scatter_average(Tensor& data, const Stream&, const std::string&) override {
    return group_.reduce_scatter_async(data.data<float>(), data.numel(), ReduceOp::average);
  }
  std::shared_ptr<Work> all_gather_shards(Tensor& data, const Stream&, const std::string&) override {
    return group_.all_gather_shards_async(data.raw_data(), data.numel(), itemsize(data.dtype()));
  }

  // `before` on the calling thread (as PyTorch runs its hook), the sum and `after` on the
  // communication thread.
  Wire16Collectives* wire16() override { return this; }
  std::shared_ptr<Work> all_reduce_sum(Tensor& wire, const Stream&, const std::string&, WireStages stages) override {
    if (stages.before) stages.before();
    return group_.all_reduce_16bit_async(wire.raw_data(), wire.numel(), wire.dtype(), std::move(stages.after));
  }
  // The sum of this rank's chunk: ring_shard_bounds' block rank(), as shard_bounds says.
  std::shared_ptr<Work> reduce_scatter_sum(Tensor& wire, const Stream&, const std::string&,
                                           WireStages stages) override {
    if (stages.before) stages.before();
    return group_.reduce_scatter_16bit_async(wire.raw_data(), wire.numel(), wire.dtype(), std::move(stages.after));
  }

 private:
  ProcessGroup& group_;
};

// CUDA tensors through Gloo: a worker thread waits for the gradients (an event), copies them to
// pinned memory on its own stream, runs the Gloo all-reduce, copies back and records an event the
// compute stream waits on. Only the worker thread ever waits for the device.
class StagedGlooComm : public GradientComm, public ShardCollectives {
 public:
  StagedGlooComm(ProcessGroup& g, Device d) : group_(g), device_(d), copy_(Stream::create(d)) {}
  ~StagedGlooComm() override {
    worker_.reset();  // finish what was posted (retired buffers included) before the buffers go
    copy_.synchronize();
    pinned_.reset();
  }

  std::string name() const override { return "gloo (staged through pinned host memory)"; }
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }

  std::shared_ptr<Work> all_reduce_average(Tensor& tensor, const Stream& compute, const std::string& what) override {
    return staged(tensor, compute, what, [this](void* host, int64_t count) {
      group_.all_reduce_async(static_cast<float*>(host), count, ReduceOp::average)->wait();
    });
  }

  // The ring's halves (dist.sharding) on the staged copy, as the host Gloo transport runs them.
  ShardCollectives* shards() override { return this; }
  std::vector<int64_t> shard_bounds(int64_t count) const override { return ring_shard_bounds(count, group_.size()); }
  std::shared_ptr<Work> reduce_scatter_average(Tensor& tensor, const Stream& compute, const std::string& what) override {
    return staged(tensor, compute, what, [this](void* host, int64_t count) {
      group_.reduce_scatter_async(static_cast<float*>(host), count, ReduceOp::average)->wait();
    });
  }
  std::shared_ptr<Work> all_gather_shards(Tensor& tensor, const Stream& compute, const std::string& what) override {
    const size_t element = itemsize(tensor.dtype());
    return staged(tensor, compute, what, [this, element](void* host, int64_t count) {
      group_.all_gather_shards_async(host, count, element)->wait();
    });
  }

  void wait(Work& work, const Stream& compute) override {
    work.wait();
    work.device_done.wait(compute);
  }

  void broadcast(Tensor& t, const Stream& compute) override {
    compute.synchronize();  // small (parameters once, buffers per step): simplicity over overlap
    Tensor host = t.to(Device::cpu());
    group_.broadcast(host.raw_data(), host.nbytes(), 0);
    t.copy_(host);
  }
  // A few kilobytes per layer, staged synchronously like broadcast (ranks sharing a GPU are a test
  // and small-scale setting). The collective itself runs as a job of the worker, behind the
  // buckets posted before it, so every rank issues its collectives in the same order.
  void all_reduce_sum(double* data, int64_t count, const Stream& compute, const std::string& what) override {
    trace::Span span(fmt::format("{} ({} doubles, staged)", what, count), "communication");
    const size_t bytes = size_t(count) * sizeof(double);
    std::vector<double> host(static_cast<size_t>(count));
    copy_bytes(host.data(), Device::cpu(), data, device_, bytes);  // returns once host holds them
    std::promise<void> summed;
    worker_->post([&] {
      try {
        group_.all_reduce(host.data(), count);
        summed.set_value();
      } catch (...) {
        summed.set_exception(std::current_exception());
      }
    });
    summed.get_future().get();
    copy_bytes(data, device_, host.data(), Device::cpu(), bytes);  // returns once host may go
  }
  std::string why_no_wire16() const override {
    return "the staged Gloo transport (ranks sharing a GPU) has no 16-bit all-reduce yet; give each rank a GPU of "
           "its own (NCCL), or set dist.grad_compression=none";
  }

 private:
  // On the worker, once `compute` has reached this point: `tensor` copied to pinned host memory,
  // `collective` run on it there, the result copied back on copy_; the work's device_done follows.
  std::shared_ptr<Work> staged(Tensor& tensor, const Stream& compute, const std::string& what,
                               std::function<void(void* host, int64_t count)> collective) {
    auto work = std::make_shared<Work>();
    Event ready = Event::create(device_);
    ready.record(compute);
    void* data = tensor.raw_data();
    const int64_t count = tensor.numel();
    const size_t bytes = tensor.nbytes();
    void* host = pinned_->get(data, bytes);
    worker_->post([=, this, collective = std::move(collective)] {
      CG_NVTX_RANGE("Gloo collective staged through host memory");
      std::exception_ptr error;
      work->started = std::chrono::steady_clock::now();
      try {
        runtime::set_device(device_);
        ready.synchronize();
        copy_to_host_async(host, data, bytes, copy_);
        copy_.synchronize();
        collective(host, count);
        copy_bytes_async(data, host, bytes, copy_);
        Event done = Event::create(device_);
        done.record(copy_);
        work->device_done = done;
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(Error(fmt::format("rank {}: {} through host staging: {}", group_.rank(), what,
                                                          e.what())));
      }
      work->finished = std::chrono::steady_clock::now();
      work->finish(error);
    });
    return work;
  }

  // A replaced buffer may still be read by a copy back that an earlier job enqueued on copy_:
  // freed by a job of its own, after those, once copy_ is idle.
  void retire(void* buffer) {
    worker_->post([this, buffer] {
      try {
        copy_.synchronize();
      } catch (const std::exception&) {  // the copy failed; its job reported it
      }
      release_pinned(buffer);
    });
  }

  // StagingBuffers deals in addresses; the runtime::PinnedBuffers here own the memory behind them
  // (released from the worker thread too, hence the mutex).
  void* allocate_pinned(size_t bytes) {
    runtime::PinnedBuffer buffer(bytes);
    void* data = buffer.data();
    std::lock_guard<std::mutex> lock(owned_mutex_);
    owned_.emplace(data, std::move(buffer));
    return data;
  }
  void release_pinned(void* data) {
    std::lock_guard<std::mutex> lock(owned_mutex_);
    owned_.erase(data);
  }

  ProcessGroup& group_;
  Device device_;
  Stream copy_;
  std::mutex owned_mutex_;
  std::map<void*, runtime::PinnedBuffer> owned_;
  std::unique_ptr<SerialWorker> worker_ = std::make_unique<SerialWorker>();
  // One pinned buffer per bucket address, replaced when a rebuilt bucket there is larger.
  std::unique_ptr<StagingBuffers> pinned_ = std::make_unique<StagingBuffers>(
      [this](size_t bytes) { return allocate_pinned(bytes); }, [this](void* p) { release_pinned(p); },
      [this](void* p) { retire(p); });
};

// One real rank standing for `ranks`: the data is already the average; the communication stream
// (or, on the CPU, a worker thread) is busy for the modeled time of `bytes_scale` times its bytes.
class ModeledComm : public GradientComm, public ShardCollectives, public Wire16Collectives {
 public:
  ModeledComm(int ranks, Link link, Device d, double bytes_scale)
      : ranks_(ranks), link_(std::move(link)), device_(d), bytes_scale_(bytes_scale) {
    if (d.is_cuda()) stream_ = std::make_unique<CommStream>(d, CollectiveWatchdog::Options{});
  }
  std::string name() const override { return fmt::format("modeled ring of {} ranks on {}", ranks_, link_.name); }
  int rank() const override { return 0; }
  int size() const override { return 1; }  // the one real rank's data is every modeled rank's
  std::shared_ptr<Work> all_reduce_average(Tensor& data, const Stream& compute, const std::string& what) override {
    return busy(compute, "all_reduce", what, data, modeled_ms(data.nbytes()), {});
  }
  void wait(Work& work, const Stream& compute) override {
    if (stream_) stream_->wait(work, compute);
    else work.wait();
  }
  void broadcast(Tensor&, const Stream&) override {}  // replicas of one rank are equal already
  void watch_replay(const Stream& compute, const std::string& what) const override {
    if (stream_) stream_->watch_replay(compute, what);
  }
  void check_health() const override {
    if (stream_) stream_->check_health();
  }
  double modeled_ms(size_t bytes) const override { return ring_all_reduce_ms(modeled(bytes), ranks_, link_); }
  // The modeled ranks hold identical batches: the sum of N equal moment vectors (counts included)
  // gives the statistics this rank has, so the data stays.
  void all_reduce_sum(double*, int64_t, const Stream&, const std::string&) override {}

  // ZeRO-1: the one real rank owns every shard; the stream is busy for half a ring each time.
  ShardCollectives* shards() override { return this; }
  std::vector<int64_t> shard_bounds(int64_t count) const override { return {0, count}; }
  std::shared_ptr<Work> reduce_scatter_average(Tensor& data, const Stream& compute, const std::string& what) override {
    return busy(compute, "reduce_scatter", what, data, ring_half_ms(modeled(data.nbytes()), ranks_, link_), {});
  }
  std::shared_ptr<Work> all_gather_shards(Tensor& data, const Stream& compute, const std::string& what) override {
    return busy(compute, "all_gather", what, data, ring_half_ms(modeled(data.nbytes()), ranks_, link_), {});
  }

  // The modeled ring's time for the 16-bit bytes (half a ring for the reduce-scatter), the stages
  // around it with their real cost; the one real rank's sum is its own values.
  Wire16Collectives* wire16() override { return this; }
  std::shared_ptr<Work> all_reduce_sum(Tensor& wire, const Stream& compute, const std::string& what,
                                       WireStages stages) override {
    return busy(compute, "all_reduce", what, wire, modeled_ms(wire.nbytes()), std::move(stages));
  }
  std::shared_ptr<Work> reduce_scatter_sum(Tensor& wire, const Stream& compute, const std::string& what,
                                           WireStages stages) override {
    return busy(compute, "reduce_scatter", what, wire, ring_half_ms(modeled(wire.nbytes()), ranks_, link_), std::move(stages));
  }

 private:
  size_t modeled(size_t real_bytes) const { return size_t(double(real_bytes) * bytes_scale_); }
  // The communication stream (or, on the CPU, a worker thread) kept busy for `ms`, between the
  // stages: on the stream, all three enqueued there; on the CPU, `before` here and `after` on the
  // worker once the time is up.
  std::shared_ptr<Work> busy(const Stream& compute, const std::string& op, const std::string& what, const Tensor& data,
                             double ms, WireStages stages) {
    const std::string wire = data.dtype() == DType::f32 ? std::string() : fmt::format(" {}", dtype_name(data.dtype()));
    const std::string detail =
        fmt::format("{}, {:.1f} MB{}, modeled {:.3f} ms", what, double(data.nbytes()) / 1e6, wire, ms);
    if (stream_) {
      auto work = stream_->begin(compute);
      work->modeled_ms = ms;
      {
        StreamGuard on_comm(stream_->stream());
        if (stages.before) stages.before();
        runtime::spin(stream_->stream(), ms * 1000.0);
        if (stages.after) stages.after();
      }
      stream_->end(work, op, detail);
      return work;
    }
    if (stages.before) stages.before();
    auto work = std::make_shared<Work>();
    work->modeled_ms = ms;
    work->started = std::chrono::steady_clock::now();
    worker_.post([work, ms, op, detail, after = std::move(stages.after)] {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
      std::exception_ptr error;
      try {
        if (after) after();
      } catch (const std::exception&) {
        error = std::current_exception();
      }
      work->finished = std::chrono::steady_clock::now();
      trace::record(op + " (" + detail + ")", "communication", work->started, work->finished);
      work->finish(error);
    });
    return work;
  }

  int ranks_;
  Link link_;
  Device device_;
  double bytes_scale_;
  SerialWorker worker_;
  std::unique_ptr<CommStream> stream_;  // CUDA only
};

}  // namespace

ShardCollectives& require_shard_collectives(GradientComm& transport, const std::string& who) {
  ShardCollectives* shards = transport.shards();
  if (!shards)
    throw UsageError(fmt::format("{}: the {} transport has no reduce-scatter and all-gather; use gloo on the CPU, "
                                 "nccl on GPUs of their own, or the modeled backend",
                                 who, transport.name()));
  return *shards;
}

std::unique_ptr<GradientComm> make_host_gloo_comm(ProcessGroup& group) { return std::make_unique<HostGlooComm>(group); }
std::unique_ptr<GradientComm> make_staged_gloo_comm(ProcessGroup& group, Device device) {
  return std::make_unique<StagedGlooComm>(group, device);
}

std::unique_ptr<GradientComm> make_nccl_comm(TcpStore& store, int rank, int world_size, Device device,
                                             double timeout_s, const std::string& key_prefix) {
  if constexpr (nccl::kLinked) {
    return make_linked_nccl_comm(store, rank, world_size, device, timeout_s, key_prefix);
  } else {
    throw Error("dist.backend=nccl: this build has no NCCL (a CPU-only build has no CUDA backend, configure with "
                "-DCUDAGRAD_CUDA=ON; the emulated GPU does not emulate NCCL); ranks communicate through Gloo "
                "(dist.backend=gloo)");
  }
}

// NVLink 4 gives an H100 SXM 450 GB/s per direction; NCCL's ring reaches about 370 GB/s of bus
// bandwidth on 8 GPUs through NVSwitch, with a few microseconds per step.
Link nvlink_link() { return {"NVLink (8x H100, NVSwitch)", 370.0, 3.0}; }
// 200 Gb/s = 25 GB/s per GPU; about 22 GB/s achieved, ~8 microseconds per hop with the switch.
Link infiniband_link() { return {"InfiniBand 200 Gb/s per GPU", 22.0, 8.0}; }

double ring_all_reduce_ms(size_t bytes, int ranks, const Link& link) {
  CG_CHECK(ranks >= 1 && link.bandwidth_gb_s > 0, "ring model: {} ranks on {}", ranks, link.name);
  if (ranks == 1) return 0.0;
  const double n = ranks, steps = 2.0 * (n - 1);
  const double transfer_s = steps / n * double(bytes) / (link.bandwidth_gb_s * 1e9);
  return (transfer_s + steps * link.latency_us * 1e-6) * 1e3;
}

double ring_half_ms(size_t bytes, int ranks, const Link& link) {
  CG_CHECK(ranks >= 1 && link.bandwidth_gb_s > 0, "ring model: {} ranks on {}", ranks, link.name);
  if (ranks == 1) return 0.0;
  const double n = ranks, steps = n - 1;
  return (steps / n * double(bytes) / (link.bandwidth_gb_s * 1e9) + steps * link.latency_us * 1e-6) * 1e3;
}

std::unique_ptr<GradientComm> make_modeled_comm(int modeled_ranks, const Link& link, Device device, double bytes_scale) {
  return std::make_unique<ModeledComm>(modeled_ranks, link, device, bytes_scale);
}

}  // namespace cg::dist
