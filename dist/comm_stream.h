// What the NCCL and modeled backends share: collectives on one high-priority communication
// stream of the rank's GPU. Each starts after an event recorded on the caller's compute stream
// (so it sees the finished gradients, while compute goes on) and ends with an event that the
// compute stream waits on before it uses the result; a watchdog thread polls that event, so the
// host never waits. With profiling on, timing events bracket each collective and it appears on
// the "communication stream" track of the timeline at its device times.
#pragma once
#include <memory>
#include <string>

#include "dist/device_clock.h"
#include "dist/watchdog.h"
#include "engine/stream.h"

namespace cg::dist {

class CommStream {
 public:
  // `watchdog`: rank, timeout and transport hooks; the thread start and completion hooks are ours.
  CommStream(Device device, CollectiveWatchdog::Options watchdog);
  ~CommStream();  // stops the watchdog first: its hooks may use the transport
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  const Stream& stream() const { return stream_; }
  Device device() const { return device_; }
  // Orders the communication stream after the work enqueued so far on `compute`; the collective's
  // kernels go on stream() next.
  std::shared_ptr<Work> begin(const Stream& compute);
  // After the collective's kernels: records its completion event and watches it. Returns the
  // numbered name used in errors ("all_reduce #12 (bucket 3, 4.0 MB)").
  std::string end(const std::shared_ptr<Work>& work, const std::string& op, const std::string& detail);
  // `compute` waits for `work` (on the device); throws if communication has failed.
  void wait(const Work& work, const Stream& compute) const;
  // CUDA graphs: collectives issued while the streams are captured do not run then, so end()
  // does not watch them; instead each replay is watched as one operation, from the work enqueued
  // so far on `compute` (the replay) to its completion, with the same timeout and abort.
  void watch_replay(const Stream& compute, const std::string& what);
  // Throws the first error the watchdog has seen (a timeout, an asynchronous error), if any.
  void check_health() const;
  CollectiveWatchdog& watchdog() { return *watchdog_; }

 private:
  void on_complete(const std::string& name, Work& work);

  Device device_;
  Stream stream_;
  std::unique_ptr<DeviceClock> clock_;  // only when profiling
  std::unique_ptr<CollectiveWatchdog> watchdog_;
};

}  // namespace cg::dist
