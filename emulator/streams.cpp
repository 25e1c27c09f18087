// Streams, captures and errors of the emulated device (emulator/device.h says how work runs).
#include <atomic>
#include <cstdio>
#include <set>

#include "emulator/device.h"
#include "cg_emu/grid.h"

namespace cg_emu {
namespace {

struct DeviceState {
  std::recursive_mutex mutex;
  CUstream_st legacy;
  std::set<CUstream_st*> streams;  // created and not destroyed
  std::set<uint64_t> live{legacy.id};  // the ids of the streams that exist: legacy, created, per-thread
  int open_captures = 0;
  cudaError_t sticky = cudaSuccess;
};

DeviceState& state() {
  static DeviceState* s = new DeviceState;  // never destroyed: streams may outlive static destructors
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;

std::atomic<uint64_t> last_stream_id{0};

// A thread's cudaStreamPerThread, gone with the thread.
struct PerThreadStream {
  CUstream_st stream{.flags = cudaStreamNonBlocking};
  PerThreadStream() {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    state().live.insert(stream.id);
  }
  ~PerThreadStream() {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    state().live.erase(stream.id);
  }
};

CUstream_st& per_thread_stream() {
  thread_local PerThreadStream s;
  return s.stream;
}

// The legacy default stream waits for all blocking streams, and they wait for it.
void add_legacy_ordering(CUstream_st* s) {
  DeviceState& d = state();
  auto wait_for = [s](CUstream_st* other) {
    const uint64_t upto = other->submitted;
    if (other->completed >= upto) return;
    s->queue.push_back([other = ref(other), upto] { drive(other, upto); });
    s->submitted++;
  };
  if (s == &d.legacy) {
    for (CUstream_st* other : d.streams)
      if (other->flags == 0) wait_for(other);
  } else if (s->flags == 0) {
    wait_for(&d.legacy);
  }
}

}  // namespace

std::recursive_mutex& device_mutex() { return state().mutex; }

CUstream_st* resolve(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy) return &state().legacy;
  if (s == cudaStreamPerThread) return &per_thread_stream();
  return s;
}

uint64_t new_stream_id() { return ++last_stream_id; }

void register_stream(CUstream_st* s) {
  state().streams.insert(s);
  state().live.insert(s->id);
}
void unregister_stream(CUstream_st* s) {
  state().streams.erase(s);
  state().live.erase(s->id);
}

cudaError_t enqueue(CUstream_st* s, Op op) {
  if (state().sticky != cudaSuccess) return state().sticky;
  if (s->capture) {
    Capture& c = *s->capture;
    c.nodes.push_back(Node{std::move(op), s->frontier});
    s->frontier = {int(c.nodes.size()) - 1};
    return cudaSuccess;
  }
  if (any_capture() && s == &state().legacy) {
    // The legacy stream orders itself after every blocking stream, captured ones too: CUDA
    // refuses that and invalidates the capture.
    invalidate_captures(cudaErrorStreamCaptureImplicit);
    return fail(cudaErrorStreamCaptureImplicit);
  }
  add_legacy_ordering(s);
  s->queue.push_back(std::move(op));
  s->submitted++;
  return cudaSuccess;
}

void drive(CUstream_st* s, uint64_t position) {
  while (s->completed < position && !s->queue.empty()) {
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    try {
      if (state().sticky == cudaSuccess) op();
    } catch (const KernelFault& f) {
      set_sticky(cudaErrorLaunchFailure, f.message);
    }
    s->completed++;
  }
}

void drive(StreamRef s, uint64_t position) {
  if (state().live.count(s.id)) drive(s.stream, position);
}

void drive_all() {
  DeviceState& d = state();
  // One pass: running work never queues more (a wait only runs what is queued already).
  drive(&d.legacy, d.legacy.submitted);
  for (CUstream_st* s : d.streams) drive(s, s->submitted);
  drive(&per_thread_stream(), per_thread_stream().submitted);
}

bool any_capture() { return state().open_captures > 0; }
void capture_opened() { state().open_captures++; }
void capture_closed() { state().open_captures--; }

void invalidate_captures(cudaError_t why) {
  for (CUstream_st* s : state().streams)
    if (s->capture && s->capture->invalidated == cudaSuccess) s->capture->invalidated = why;
}

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

cudaError_t sticky_error() { return state().sticky; }

void set_sticky(cudaError_t e, const std::string& message) {
  DeviceState& d = state();
  if (d.sticky != cudaSuccess) return;
  d.sticky = e;
  std::fprintf(stderr, "emulated device: %s\n", message.c_str());
  // Work still queued will never run, as on a GPU whose context a fault has lost.
  auto drop = [](CUstream_st* s) {
    s->queue.clear();
    s->completed = s->submitted;
  };
  drop(&d.legacy);
  for (CUstream_st* s : d.streams) drop(s);
}

cudaError_t take_last_error() {
  if (state().sticky != cudaSuccess) return state().sticky;
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t peek_last_error() { return state().sticky != cudaSuccess ? state().sticky : last_error; }

}  // namespace cg_emu
