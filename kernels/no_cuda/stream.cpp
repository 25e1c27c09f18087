// kernels/cuda/stream.h without CUDA: every call fails naming the missing backend (no CUDA
// device exists in such a build, so only a bug reaches these).
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/stream.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void set_device(int) { no_cuda("set_device"); }
int current_device() { no_cuda("current_device"); }
Stream stream_create(int, int) { no_cuda("stream_create"); }
void stream_destroy(Stream) {}
Event event_create(int, bool) { no_cuda("event_create"); }
void event_destroy(Event) {}
void event_record(Event, Stream) { no_cuda("event_record"); }
void stream_wait_event(Stream, Event) { no_cuda("stream_wait_event"); }
void event_synchronize(Event) { no_cuda("event_synchronize"); }
bool event_done(Event) { no_cuda("event_done"); }
float event_elapsed_ms(Event, Event) { no_cuda("event_elapsed_ms"); }

}  // namespace cg::kernels::cuda
#endif
