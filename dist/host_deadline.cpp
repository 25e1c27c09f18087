#include "dist/host_deadline.h"

#include <chrono>
#include <cstdlib>

#include "util/log.h"

namespace cg::dist {

HostDeadline::HostDeadline(double seconds, std::function<void()> on_expiry) {
  if (seconds <= 0) return;
  waiter_ = std::thread([this, seconds, on_expiry = std::move(on_expiry)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!finished_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) on_expiry();
  });
}

HostDeadline::~HostDeadline() {
  if (!waiter_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  finished_.notify_one();
  waiter_.join();
}

void exit_naming_cause(const std::string& message) {
  log::write_error(message);  // flushed, with the rank where other launchers give none
  std::_Exit(1);
}

}  // namespace cg::dist
