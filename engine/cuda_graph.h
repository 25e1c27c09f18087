// A captured CUDA graph with its private memory, like torch.cuda.CUDAGraph: capture() records
// what `work` enqueues on a stream (nothing runs) while the stream's allocations come from the
// graph's own pool (engine/capture_pool.h), and replay() runs the recording again with one launch.
// Replays reuse the captured kernels' arguments and addresses as they were: inputs must be copied
// into tensors that existed before the capture, per-step scalars read from device memory, and
// every lazily created state (optimizer buffers, cuDNN algorithm choices, handles) created by
// eager runs first. Device-only: the host code in `work` runs once, at capture.
#pragma once
#include <functional>
#include <memory>

#include "engine/capture_pool.h"
#include "engine/stream.h"

namespace cg {

class CudaGraph {
 public:
  // The pool lives on `stream`'s device's caching allocator.
  explicit CudaGraph(const Stream& stream);
  ~CudaGraph();  // destroys the executable graph, then its pool
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Runs `work` now, eagerly, with the stream's allocations served from and returned to this
  // graph's pool. A capture of the same work afterwards finds every block it asks for cached
  // there, so no allocation reaches cudaMalloc while the capture is open (legal in relaxed mode,
  // but each one is slow and the graph then holds memory its warm-up run did not need). Blocks
  // that outlive `work` stay out of the capture's reach: copy results out rather than keep them.
  void warm_up(const std::function<void()>& work);
  // Captures what `work` enqueues on the stream; `work` must leave any other stream it forks
  // joined back (by events) before returning. On an exception the capture is abandoned and the
  // stream usable again. Captures once.
  void capture(const std::function<void()>& work);
  // Enqueues the recorded work on the stream; the host does not wait.
  void replay() const;
  bool captured() const { return exec_ != nullptr; }
  PoolStats pool_stats() const { return pool_->stats(); }
  // How many allocations reached the device (cudaMalloc) while the capture was open: 0 after a
  // warm_up of the same work.
  size_t backend_allocations_in_capture() const { return backend_allocations_in_capture_; }

 private:
  Stream stream_;
  std::unique_ptr<CapturePool> pool_;
  void* exec_ = nullptr;  // a cudaGraphExec_t
  size_t backend_allocations_in_capture_ = 0;
};

}  // namespace cg
