// The CUDA runtime's streams, events, graphs and kernel launches, on the emulated device.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <stdexcept>

#include "emulator/device.h"
#include "cg_emu/counters.h"
#include "cg_emu/grid.h"
#include "cg_emu/launch.h"
#include "emulator/traffic_counter.h"

using namespace cg_emu;

namespace {

std::atomic<uint64_t> kernels_launched{0}, host_waits{0}, host_polls{0};
std::map<std::string, uint64_t> launched_by_name;  // under CG_EMU_LOCK

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Nodes a capture's stream has (transitively) waited for, the frontier's nodes included.
std::set<int> ancestors(const Capture& c, const std::vector<int>& frontier) {
  std::set<int> seen;
  std::vector<int> todo = frontier;
  while (!todo.empty()) {
    const int n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    for (int d : c.nodes[size_t(n)].deps) todo.push_back(d);
  }
  return seen;
}

void leave_capture(Capture& c) {
  for (CUstream_st* s : c.streams) {
    s->capture.reset();
    s->frontier.clear();
  }
  capture_closed();
}

}  // namespace

namespace cg_emu {

Counters counters() { return {kernels_launched.load(), host_waits.load(), host_polls.load()}; }
std::map<std::string, uint64_t> kernels_by_name() {
  CG_EMU_LOCK;
  return launched_by_name;
}
void count_host_wait() { ++host_waits; }

void enqueue_kernel(cudaStream_t stream, dim3 grid, dim3 block, size_t shared_bytes,
                    std::shared_ptr<const void> closure, void (*fn)(const void*), const char* name,
                    const void* entry) {
  CG_EMU_LOCK;
  ++kernels_launched;
  ++launched_by_name[name];
  if (!check_launch(grid, block, shared_bytes).empty()) {
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  bool reverse = false;
  try {
    reverse = reverse_schedule();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "cudagrad emulated device: %s\n", e.what());
    fail(cudaErrorInvalidValue);
    return;
  }
  enqueue(resolve(stream), [grid, block, shared_bytes, closure, fn, name, entry, reverse] {
    if (traffic_recording()) traffic_grid_started(name, entry, grid, block, shared_bytes);
    run_grid(grid, block, KernelBody{fn, closure.get()}, name, reverse);
    traffic_grid_finished();
    if (const std::string damaged = damaged_guards(); !damaged.empty())
      throw KernelFault{std::string(name) + ": wrote outside its memory: " + damaged};
  });
}

}  // namespace cg_emu

extern "C" {

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  auto* s = new CUstream_st;
  s->flags = flags;
  s->priority = priority;
  register_stream(s);
  *stream = s;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithPriority(stream, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CG_EMU_LOCK;
  CUstream_st* s = resolve(stream);
  if (s != stream) return fail(cudaErrorInvalidResourceHandle);  // the default streams are not destroyed
  drive(s, s->submitted);  // CUDA lets queued work finish
  unregister_stream(s);
  delete s;
  return cudaSuccess;
}

namespace {

cudaError_t finish_stream(cudaStream_t stream) {
  CG_EMU_LOCK;
  CUstream_st* s = resolve(stream);
  if (s->capture) {
    s->capture->invalidated = cudaErrorStreamCaptureUnsupported;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  drive(s, s->submitted);
  return sticky_error();
}

}  // namespace

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  ++host_waits;
  return finish_stream(stream);
}

// A query runs the stream to its end, as if the device had been quick (see cudaEventQuery).
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  ++host_polls;
  return finish_stream(stream);
}

cudaError_t cudaDeviceSynchronize() {
  CG_EMU_LOCK;
  ++host_waits;
  if (any_capture()) {
    invalidate_captures(cudaErrorStreamCaptureUnsupported);
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  drive_all();
  return sticky_error();
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  auto* e = new CUevent_st;
  e->flags = flags;
  *event = e;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  CG_EMU_LOCK;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  CUstream_st* s = resolve(stream);
  if (s->capture) {  // the event now stands for the capture's nodes so far on this stream
    event->capture = s->capture;
    event->frontier = s->frontier;
    event->stream = {};
    return cudaSuccess;
  }
  event->capture.reset();
  auto time = std::make_shared<double>(-1.0);
  const cudaError_t e = enqueue(s, [time] { *time = now_ms(); });
  if (e != cudaSuccess) return e;
  event->time_ms = time;
  event->stream = ref(s);
  event->position = s->submitted;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  CUstream_st* s = resolve(stream);
  if (event->capture) {
    if (!s->capture) {  // the stream joins the capture, after the event's nodes
      s->capture = event->capture;
      s->frontier = event->frontier;
      event->capture->streams.push_back(s);
    } else if (s->capture == event->capture) {
      s->frontier.insert(s->frontier.end(), event->frontier.begin(), event->frontier.end());
    } else {
      return fail(cudaErrorStreamCaptureIsolation);
    }
    return cudaSuccess;
  }
  if (!event->stream) return cudaSuccess;  // never recorded: nothing to wait for
  if (s->capture) return cudaSuccess;      // recorded before the capture: already in the past of every replay
  const StreamRef other = event->stream;
  const uint64_t upto = event->position;
  return enqueue(s, [other, upto] { drive(other, upto); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  CG_EMU_LOCK;
  ++host_waits;
  if (event->capture) return fail(cudaErrorStreamCaptureUnsupported);
  if (event->stream) drive(event->stream, event->position);
  return sticky_error();
}

// A query runs the event's stream up to it, as if the device had been quick: a host that polls
// never waits for ever, and the answer stays deterministic.
cudaError_t cudaEventQuery(cudaEvent_t event) {
  CG_EMU_LOCK;
  ++host_polls;
  if (event->capture) return fail(cudaErrorCapturedEvent);
  if (event->stream) drive(event->stream, event->position);
  return sticky_error();
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  CG_EMU_LOCK;
  if ((start->flags | end->flags) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
  if (!start->time_ms || !end->time_ms) return fail(cudaErrorInvalidResourceHandle);
  if (*start->time_ms < 0 || *end->time_ms < 0) return fail(cudaErrorNotReady);
  *ms = float(*end->time_ms - *start->time_ms);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode /*mode*/) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  CUstream_st* s = resolve(stream);
  if (s != stream) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
  if (s->capture) return fail(cudaErrorIllegalState);
  s->capture = std::make_shared<Capture>();
  s->capture->origin = s;
  s->capture->streams.push_back(s);
  s->frontier.clear();
  capture_opened();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  CG_EMU_LOCK;
  CUstream_st* s = resolve(stream);
  *graph = nullptr;
  if (!s->capture) return fail(cudaErrorIllegalState);
  std::shared_ptr<Capture> c = s->capture;
  if (c->origin != s) {
    c->invalidated = cudaErrorStreamCaptureUnmatched;
    return fail(cudaErrorStreamCaptureUnmatched);
  }
  // Every stream that joined must have rejoined: its last node reached by the origin's frontier.
  const std::set<int> joined = ancestors(*c, s->frontier);
  for (CUstream_st* other : c->streams)
    for (int n : other->frontier)
      if (!joined.count(n) && c->invalidated == cudaSuccess) c->invalidated = cudaErrorStreamCaptureUnjoined;
  leave_capture(*c);
  if (c->invalidated != cudaSuccess) {
    const cudaError_t why = c->invalidated;
    return fail(why == cudaErrorStreamCaptureUnjoined ? why : cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(c->nodes)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  CG_EMU_LOCK;
  CUstream_st* s = resolve(stream);
  if (!s->capture) *status = cudaStreamCaptureStatusNone;
  else *status = s->capture->invalidated == cudaSuccess ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long /*flags*/) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  CG_EMU_LOCK;
  drive_all();  // a replay still queued uses the nodes
  delete exec;
  return cudaSuccess;
}

// A replay runs the nodes in the order they were recorded, which respects every dependency.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  CG_EMU_LOCK;
  CG_EMU_STICKY;
  const CUgraphExec_st* g = exec;
  return enqueue(resolve(stream), [g] {
    for (const Node& n : g->nodes) n.op();
  });
}

}  // extern "C"
