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
// Ends a capture that failed part-way and discards what was recorded, so that the stream is
// usable again; does not throw (it runs while an exception is on its way).
void graph_capture_abort(Stream stream);
// Whether `stream` is being captured right now: its work is recorded, not run, so nothing may
// wait for or poll an event recorded on it.
bool stream_is_capturing(Stream stream);
// Whether any capture begun with graph_capture_begin is still open in this process. While one is,
// nothing may synchronize the device: cudaDeviceSynchronize invalidates a capture on the same
// device whatever its mode or thread (it would wait for work that is recorded, not run).
bool any_capture_in_progress();
void graph_launch(GraphExec graph, Stream stream);
void graph_destroy(GraphExec graph);  // does not throw

}  // namespace cg::kernels::cuda
