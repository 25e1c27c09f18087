// kernels/cuda/graph.h without CUDA: fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/graph.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {
void graph_capture_begin(Stream) { no_cuda("graph_capture_begin"); }
GraphExec graph_capture_end(Stream) { no_cuda("graph_capture_end"); }
void graph_capture_abort(Stream) {}
bool stream_is_capturing(Stream) { return false; }  // nothing can be captured without CUDA
bool any_capture_in_progress() { return false; }
void graph_launch(GraphExec, Stream) { no_cuda("graph_launch"); }
void graph_destroy(GraphExec) {}
}  // namespace cg::kernels::cuda
#endif
