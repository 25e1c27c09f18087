// The emulated device's state: its streams, events, captures and memory, behind one lock. Work
// queued on a stream runs when the host needs it (a synchronization, a query, a pageable copy) or
// when a stream that waits for it runs: as late as CUDA allows, on the host thread that asks.
// That is deterministic, and it makes a missing cross-stream wait visible: the stream that should
// have waited runs before the work it depends on, and reads what is not written yet.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cg_emu {

struct Capture;

// One unit of queued work: a grid, a copy, a memset, a wait for another stream, an event marker.
using Op = std::function<void()>;

// A number no other stream of this process has had (see StreamRef).
uint64_t new_stream_id();

}  // namespace cg_emu

struct CUstream_st {
  unsigned flags = 0;  // cudaStreamNonBlocking or 0 (synchronizes with the legacy stream)
  int priority = 0;
  std::deque<cg_emu::Op> queue;
  uint64_t submitted = 0, completed = 0;
  // While captured: the graph it records into, and the nodes its next node depends on.
  std::shared_ptr<cg_emu::Capture> capture;
  std::vector<int> frontier;
  const uint64_t id = cg_emu::new_stream_id();
};

namespace cg_emu {

// A stream as the work queued on other streams and the events recorded on it name it: the
// pointer, and the id of the stream it pointed to then. A stream may be destroyed while a wait
// for it is still queued elsewhere or an event recorded on it is still waited on (CUDA allows
// both: the stream's work finishes, and cudaStreamDestroy runs it all here), and another stream
// may be created at the same address. A raw pointer then drove freed memory, or the new stream's
// work (an emulated ZeRO test crashed in about one process in ten, calling a freed queue's task).
struct StreamRef {
  CUstream_st* stream = nullptr;
  uint64_t id = 0;
  explicit operator bool() const { return stream != nullptr; }
};
inline StreamRef ref(CUstream_st* s) { return {s, s->id}; }

}  // namespace cg_emu

struct CUevent_st {
  unsigned flags = 0;
  cg_emu::StreamRef stream;  // the last record's stream and queue position
  uint64_t position = 0;
  std::shared_ptr<double> time_ms;  // set when the marker runs (timing events)
  std::shared_ptr<cg_emu::Capture> capture;  // recorded during a capture: its frontier then
  std::vector<int> frontier;
};

namespace cg_emu {

// Counts a blocking call for cg_emu::counters() (cg_emu/counters.h; the counters live in
// runtime_streams.cpp).
void count_host_wait();

struct Node {
  Op op;
  std::vector<int> deps;
};

struct Capture {
  CUstream_st* origin;
  std::vector<CUstream_st*> streams;  // origin first, then those that joined
  std::vector<Node> nodes;            // in the order recorded: a topological order
  cudaError_t invalidated = cudaSuccess;
};

}  // namespace cg_emu

struct CUgraph_st {
  std::vector<cg_emu::Node> nodes;
};
struct CUgraphExec_st {
  std::vector<cg_emu::Node> nodes;
};

namespace cg_emu {

// The lock every runtime call holds; recursive because running work can reach other streams.
std::recursive_mutex& device_mutex();

// The stream a handle names: the legacy default stream for 0 / cudaStreamLegacy, this host
// thread's stream for cudaStreamPerThread.
CUstream_st* resolve(cudaStream_t s);

// Queues op on s (or records it into s's capture).
cudaError_t enqueue(CUstream_st* s, Op op);
// Runs s's queued work until `position` operations have completed.
void drive(CUstream_st* s, uint64_t position);
// The same for a stream that may have been destroyed since: then it ran all its work then, and
// there is nothing to do.
void drive(StreamRef s, uint64_t position);
void drive_all();  // every stream to its end (cudaDeviceSynchronize)
bool any_capture();
void invalidate_captures(cudaError_t why);
void register_stream(CUstream_st* s);  // created streams take part in legacy ordering and sync
void unregister_stream(CUstream_st* s);
void capture_opened();
void capture_closed();

// Errors: a fault while running work is sticky (every later call fails, as a GPU context is lost
// after one); a refused call sets only the calling thread's last error.
cudaError_t fail(cudaError_t e);  // records e as the last error and returns it
cudaError_t sticky_error();
void set_sticky(cudaError_t e, const std::string& message);
cudaError_t take_last_error();
cudaError_t peek_last_error();

// The first lines of a runtime call: hold the device, and fail at once after a sticky fault.
#define CG_EMU_LOCK std::lock_guard<std::recursive_mutex> device_lock_(::cg_emu::device_mutex())
#define CG_EMU_STICKY \
  if (::cg_emu::sticky_error() != cudaSuccess) return ::cg_emu::sticky_error()

// Memory the runtime handed out: device allocations and pinned host memory.
enum class Memory { device, pinned, pageable };
Memory memory_kind(const void* p, size_t bytes);
// Every device allocation as (address, bytes), by address (for cg_emu/traffic.h).
std::vector<std::pair<uintptr_t, size_t>> device_allocations();
// "" when the guard zones around every device allocation are intact, else the first damaged
// allocation and where it was written (emulator/runtime_memory.cpp): checked after each kernel.
std::string damaged_guards();

}  // namespace cg_emu
