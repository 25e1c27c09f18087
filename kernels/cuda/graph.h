// CUDA graphs: record everything a stream does between begin and end (no kernel runs), then
// replay the whole recording with one launch. Capture is "relaxed" so that stream-ordered
// allocations (cudaMallocAsync) and event creation may happen inside; work on other streams that
// is ordered after the captured stream by events joins the graph.
#pragma once
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

using GraphExec = void*;  // a cudaGraphExec_t

void graph_capture_begin(Stream stream);
GraphExec graph_capture_end(Stream stream);  // instantiated, ready to launch
void graph_launch(GraphExec graph, Stream stream);
void graph_destroy(GraphExec graph);  // does not throw

}  // namespace cg::kernels::cuda
