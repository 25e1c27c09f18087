#include "kernels/cuda/check.h"
#include "kernels/cuda/graph.h"

namespace cg::kernels::cuda {

void graph_capture_begin(Stream stream) {
  CG_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed));
}

GraphExec graph_capture_end(Stream stream) {
  cudaGraph_t graph = nullptr;
  CG_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CG_CUDA_CHECK(e);
  return exec;
}

void graph_capture_abort(Stream stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
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
