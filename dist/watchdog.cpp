#include "dist/watchdog.h"

#include <vector>

#include "util/check.h"
#include "util/log.h"

namespace cg::dist {

CollectiveWatchdog::CollectiveWatchdog(Options options) : options_(std::move(options)) {
  if (options_.background_thread) thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string CollectiveWatchdog::watch(const std::shared_ptr<Work>& work, const std::string& op,
                                      const std::string& detail, std::function<bool()> is_done) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string name = fmt::format("{} #{}", op, ++issued_per_op_[op]);
  if (!detail.empty()) name += " (" + detail + ")";
  if (!error_.empty()) {  // the communicator is gone: this one will never complete
    work->finish(std::make_exception_ptr(Error(error_)));
    return name;
  }
  items_.push_back({work, name, std::move(is_done), Clock::now()});
  return name;
}

void CollectiveWatchdog::check_health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) throw Error(error_);
}

bool CollectiveWatchdog::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !error_.empty();
}

size_t CollectiveWatchdog::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.size();
}

void CollectiveWatchdog::poll(Clock::time_point now) {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!items_.empty() && items_.front().is_done()) {
      Item& item = items_.front();
      item.work->finished = Clock::now();
      if (options_.on_complete) options_.on_complete(item.name, *item.work);
      item.work->finish();
      items_.pop_front();
    }
    if (items_.empty() || !error_.empty()) return;
    const Item& oldest = items_.front();
    const double waited_s = std::chrono::duration<double>(now - oldest.issued).count();
    if (options_.timeout_s > 0 && waited_s > options_.timeout_s)
      message = fmt::format("rank {}: {} timed out after {:g} s (dist.timeout_s): a peer is stuck, dead or "
                            "running a different sequence of collectives",
                            options_.rank, oldest.name, options_.timeout_s);
  }
  // Asked outside the lock: it may talk to the transport.
  if (message.empty() && options_.async_error) {
    const std::string async = options_.async_error();
    if (!async.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (items_.empty()) return;  // it completed meanwhile; a later round will see the error again
      message = fmt::format("rank {}: {} failed: {}", options_.rank, items_.front().name, async);
    }
  }
  if (!message.empty()) fail(message);
}

void CollectiveWatchdog::fail(const std::string& message) {
  std::deque<Item> outstanding;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) return;  // the first failure is the one reported
    error_ = message + (options_.abort ? "; communication aborted" : "");
    outstanding.swap(items_);
  }
  log::error("{}", error_);
  if (options_.abort) {
    try {
      options_.abort();
    } catch (const std::exception& e) {
      log::error("rank {}: aborting communication failed too: {}", options_.rank, e.what());
    }
  }
  for (Item& item : outstanding) {
    item.work->finished = Clock::now();
    item.work->finish(std::make_exception_ptr(Error(error_)));
  }
}

void CollectiveWatchdog::run() {
  try {
    if (options_.on_thread_start) options_.on_thread_start();
  } catch (const std::exception& e) {
    fail(fmt::format("rank {}: the communication watchdog could not start: {}", options_.rank, e.what()));
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      poll();
    } catch (const std::exception& e) {  // a completion test that throws is itself a failure
      fail(fmt::format("rank {}: the communication watchdog failed: {}", options_.rank, e.what()));
    }
    lock.lock();
    stop_cv_.wait_for(lock, options_.poll_interval, [&] { return stopping_; });
  }
}

}  // namespace cg::dist
