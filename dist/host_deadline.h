// A deadline for a host call that nothing can interrupt. NCCL's communicator setup
// (ncclCommInitRank) blocks until every rank has joined, and the collective watchdog
// (dist/watchdog.h) only watches what is already issued, so a peer that stalls before joining
// would leave this rank waiting for ever. While a HostDeadline lives, a helper thread waits; if
// the scope outlives `seconds`, it runs `on_expiry`, typically exit_naming_cause(), which ends
// the process with the cause on stderr: a clear error and a non-zero exit instead of a hang (the
// launcher then stops the other ranks).
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace cg::dist {

class HostDeadline {
 public:
  // seconds <= 0: no deadline, nothing runs.
  HostDeadline(double seconds, std::function<void()> on_expiry);
  ~HostDeadline();  // the scope finished in time: cancels and joins the helper
  HostDeadline(const HostDeadline&) = delete;
  HostDeadline& operator=(const HostDeadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  std::thread waiter_;
};

// Writes "error: <message>" to stderr (util/log.h) and ends the process with exit status 1 at
// once: no destructors, since the thread that would run them is the one stuck.
[[noreturn]] void exit_naming_cause(const std::string& message);

}  // namespace cg::dist
