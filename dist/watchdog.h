// Watches collectives that complete asynchronously (NCCL kernels, the modeled backend's spin, both
// on a CUDA stream) from a background thread, as PyTorch's NCCL watchdog does: it marks each Work
// done when its completion test says so, and turns one that fails (the transport's asynchronous
// error) or outlives the timeout into an error naming the rank and the operation, e.g.
//   rank 1: all_reduce #12 (bucket 3, 4.0 MB) timed out after 120 s (dist.timeout_s) ...
// It then calls the abort hook (ncclCommAbort: in-flight collectives end, so no stream waits
// forever) and fails every outstanding Work; the next call on the training thread rethrows.
// Nothing here knows NCCL or CUDA: completion, error and abort are functions, and poll() can be
// driven by hand, so the logic runs and is tested on the CPU with a never-finishing item.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/process_group.h"

namespace cg::dist {

class CollectiveWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    int rank = 0;
    double timeout_s = 0;  // per collective, from issue to completion; 0: no limit
    std::chrono::milliseconds poll_interval{5};
    bool background_thread = true;  // false: the owner (a test) calls poll()
    // "" while healthy, else the transport's description of an asynchronous failure.
    std::function<std::string()> async_error;
    // Called once, on the first failure, before the outstanding Works fail.
    std::function<void()> abort;
    // Called first on the watchdog's own thread (e.g. to make the rank's GPU current there).
    std::function<void()> on_thread_start;
    // Called as each collective completes, in issue order (e.g. to put it on the timeline).
    std::function<void(const std::string& name, Work& work)> on_complete;
  };

  explicit CollectiveWatchdog(Options options);
  ~CollectiveWatchdog();  // stops polling; outstanding Works stay as they are
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Watches `work` until `is_done()` is true. `op` is numbered per kind ("all_reduce #12") and
  // `detail` appended in parentheses; returns that name. Collectives on one stream complete in the
  // order they were issued, so only the oldest is tested for completion and timeout.
  std::string watch(const std::shared_ptr<Work>& work, const std::string& op, const std::string& detail,
                    std::function<bool()> is_done);
  // Throws the first failure, if there was one.
  void check_health() const;
  bool failed() const;
  size_t outstanding() const;
  // One round: completes the finished collectives, then checks the oldest for failure or timeout.
  void poll(Clock::time_point now = Clock::now());

 private:
  struct Item {
    std::shared_ptr<Work> work;
    std::string name;
    std::function<bool()> is_done;
    Clock::time_point issued;
  };
  void fail(const std::string& message);
  void run();

  Options options_;
  mutable std::mutex mutex_;
  std::condition_variable stop_cv_;
  std::deque<Item> items_;
  std::map<std::string, int64_t> issued_per_op_;
  std::string error_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace cg::dist
