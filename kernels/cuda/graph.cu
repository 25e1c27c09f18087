#include <atomic>

#include "kernels/cuda/check.h"
#include "kernels/cuda/graph.h"

namespace cg::kernels::cuda {
namespace {
// Captures begun and not yet ended or aborted, in this process (any thread, any stream).
std::atomic<int> captures_open{0};
}  // namespace

bool any_capture_in_progress() { return captures_open.load(std::memory_order_acquire) > 0; }

void graph_capture_begin(Stream stream) {
  CG_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed));
  captures_open.fetch_add(1, std::memory_order_acq_rel);
}

GraphExec graph_capture_end(Stream stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
  captures_open.fetch_sub(1, std::memory_order_acq_rel);  // over, whether it succeeded or not
  // An operation illegal during the capture (a synchronization, a pageable copy) surfaces at this
  // call, as the capture invalidated.
  CG_CUDA_CHECK_RESULT(ended, "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CG_CUDA_CHECK_RESULT(e, "cudaGraphInstantiate");
  return exec;
}

void graph_capture_abort(Stream stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
  captures_open.fetch_sub(1, std::memory_order_acq_rel);
  if (graph) cudaGraphDestroy(graph);
  if (e != cudaSuccess) cudaGetLastError();  // an invalidated capture reports here; the cause was thrown already
}

bool stream_is_capturing(Stream stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CG_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

void graph_launch(GraphExec graph, Stream stream) {
  CG_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)));
}

void graph_destroy(GraphExec graph) {
  if (graph) CG_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)));
}

}  // namespace cg::kernels::cuda
