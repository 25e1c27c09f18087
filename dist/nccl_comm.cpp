// NCCL for CUDA gradients, with a watchdog: collectives run on a high-priority communication
// stream after an event from the compute stream; a watchdog thread marks them done when their
// event completes, and turns a collective that fails (NCCL's asynchronous error) or outlives the
// timeout into an error naming the rank and the operation, aborting the communicator so no stream
// waits forever. The next DDP call on the training thread then throws that error.
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "dist/gradient_comm.h"
#include "kernels/cuda/comm.h"
#include "kernels/cuda/stream.h"
#include "util/check.h"
#include "util/log.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

using Clock = std::chrono::steady_clock;

class NcclComm : public GradientComm {
 public:
  NcclComm(TcpStore& store, int rank, int world, Device d, double timeout_s)
      : rank_(rank), device_(d), timeout_s_(timeout_s) {
    CG_CHECK(d.is_cuda(), "NCCL needs CUDA tensors, the model is on {}", d.str());
    std::string id;
    if (rank == 0) {
      id = kernels::cuda::nccl_unique_id();
      store.set("nccl/unique_id", id);
    } else {
      id = store.get_string("nccl/unique_id");
    }
    comm_ = kernels::cuda::nccl_init(id, world, rank, d.index);
    stream_ = Stream::create(d, -1);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclComm() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    watchdog_.join();
    if (!aborted_) stream_.synchronize();
    kernels::cuda::nccl_destroy(comm_);
  }

  std::shared_ptr<Work> all_reduce_average(float* data, int64_t count, const Stream& compute,
                                           const std::string& what) override {
    check_health();
    auto work = start(compute);
    kernels::cuda::nccl_all_reduce_average(comm_, data, count, stream_.handle());
    finish_on_stream(work, fmt::format("all_reduce {} ({:.1f} MB)", what, double(count) * 4 / 1e6));
    return work;
  }

  void wait(Work& work, const Stream& compute) override {
    check_health();
    work.device_done.wait(compute);
  }

  void broadcast(Tensor& t, const Stream& compute) override {
    check_health();
    auto work = start(compute);
    kernels::cuda::nccl_broadcast(comm_, t.raw_data(), t.nbytes(), 0, stream_.handle());
    finish_on_stream(work, "broadcast " + t.str());
    work->device_done.wait(compute);
  }

  std::string name() const override { return fmt::format("nccl {}", kernels::cuda::nccl_version()); }

 private:
  struct Pending {
    std::shared_ptr<Work> work;
    std::string what;
    Clock::time_point issued;
  };

  std::shared_ptr<Work> start(const Stream& compute) {
    auto work = std::make_shared<Work>();
    Event ready = Event::create(device_);
    ready.record(compute);
    ready.wait(stream_);
    work->started = std::chrono::steady_clock::now();
    return work;
  }

  void finish_on_stream(const std::shared_ptr<Work>& work, std::string what) {
    work->device_done = Event::create(device_);
    work->device_done.record(stream_);
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({work, std::move(what), Clock::now()});
  }

  void check_health() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) throw Error(error_);
  }

  void watch() {
    kernels::cuda::set_device(device_.index);
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return;
        while (!pending_.empty() && pending_.front().work->device_done.done()) {
          Pending& p = pending_.front();
          p.work->finished = std::chrono::steady_clock::now();
          // Host-side times (issue to observed completion, within the 5 ms poll): for exact
          // device times use Nsight Systems, which sees the NVTX ranges and NCCL kernels.
          trace::record(p.what, "communication stream (NCCL)", p.work->started, p.work->finished);
          p.work->finish();
          pending_.pop_front();
        }
        if (!pending_.empty() && error_.empty()) {
          const Pending& p = pending_.front();
          const std::string async = kernels::cuda::nccl_async_error(comm_);
          const double waited = std::chrono::duration<double>(Clock::now() - p.issued).count();
          if (!async.empty()) error_ = fmt::format("rank {}: NCCL {} failed: {}", rank_, p.what, async);
          else if (waited > timeout_s_)
            error_ = fmt::format("rank {}: NCCL {} did not finish within {} s (dist.timeout_s): a peer is stuck or dead",
                                 rank_, p.what, timeout_s_);
          if (!error_.empty()) {
            log::error("{}; aborting the communicator", error_);
            kernels::cuda::nccl_abort(comm_);  // in-flight collectives end, so their streams go on
            aborted_ = true;
            for (Pending& q : pending_) q.work->finish(std::make_exception_ptr(Error(error_)));
            pending_.clear();
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  int rank_;
  Device device_;
  double timeout_s_;
  kernels::cuda::NcclComm comm_ = nullptr;
  Stream stream_;
  std::mutex mutex_;
  std::deque<Pending> pending_;
  std::string error_;
  bool stopping_ = false, aborted_ = false;
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<GradientComm> make_nccl_comm(TcpStore& store, int rank, int world_size, Device device,
                                             double timeout_s) {
  return std::make_unique<NcclComm>(store, rank, world_size, device, timeout_s);
}

}  // namespace cg::dist
