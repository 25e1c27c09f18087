// Streams and events as small value types, and the current stream of each thread.
// Every op enqueues its kernels on current_stream(device). It starts as the device's legacy
// default stream; the trainer makes a non-blocking compute stream current, and the data-parallel
// layer runs all-reduces on a communication stream ordered after compute by events. On the CPU
// all of this is a no-op: a CPU Stream has a null handle and events are complete at once.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/device.h"

namespace cg {

// A cudaStream_t / cudaEvent_t, opaque so that this header needs no CUDA (or kernels/) header.
using StreamHandle = void*;
using EventHandle = void*;

class Stream {
 public:
  Stream() = default;  // the CPU "stream", or the legacy default stream of cuda:0 when given
  Stream(Device device, StreamHandle handle) : device_(device), handle_(handle) {}
  // A new non-blocking stream on a CUDA device; priority -1 is high (communication).
  static Stream create(Device device, int priority = 0);

  Device device() const { return device_; }
  StreamHandle handle() const { return handle_; }
  // Identifies the stream to the caching allocator (blocks freed on it are reused on it).
  uint64_t id() const { return reinterpret_cast<uintptr_t>(handle_); }
  void synchronize() const;  // the host waits for everything enqueued so far
  bool operator==(const Stream& o) const { return device_ == o.device_ && handle_ == o.handle_; }

 private:
  Device device_;
  StreamHandle handle_ = nullptr;
  std::shared_ptr<void> owner_;  // destroys a created stream with its last copy
};

struct EventOptions {
  bool timing = false;  // the event can be used with elapsed_ms (a little more expensive to record)
};

class Event {
 public:
  Event() = default;  // nothing recorded: wait and synchronize return at once
  static Event create(Device device, EventOptions options = {});
  void record(const Stream& stream);
  void wait(const Stream& stream) const;  // later work on `stream` waits for this event
  void synchronize() const;               // the host waits
  bool done() const;
  static float elapsed_ms(const Event& start, const Event& end);
  bool defined() const { return handle_ != nullptr; }

 private:
  EventHandle handle_ = nullptr;
  std::shared_ptr<void> owner_;
};

// The stream this thread's ops on `device` use.
Stream current_stream(Device device);
void set_current_stream(const Stream& stream);

// Makes `stream` current for a scope and restores the previous one.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

}  // namespace cg
