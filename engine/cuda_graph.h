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

  // Captures what `work` enqueues on the stream; `work` must leave any other stream it forks
  // joined back (by events) before returning. On an exception the capture is abandoned and the
  // stream usable again. Captures once.
  void capture(const std::function<void()>& work);
  // Enqueues the recorded work on the stream; the host does not wait.
  void replay() const;
  bool captured() const { return exec_ != nullptr; }
  PoolStats pool_stats() const { return pool_->stats(); }

 private:
  Stream stream_;
  std::unique_ptr<CapturePool> pool_;
  void* exec_ = nullptr;  // a cudaGraphExec_t
};

}  // namespace cg
