// CUDA streams and events as opaque handles, so the engine can order work without CUDA headers.
// Streams are created non-blocking: they never wait implicitly on the legacy default stream, so
// compute, copy and communication streams overlap unless an event says otherwise.
#pragma once
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

using Event = void*;  // a cudaEvent_t

void set_device(int device);
int current_device();

// priority: 0 normal, -1 high (the communication stream, so all-reduces are not starved).
Stream stream_create(int device, int priority = 0);
void stream_destroy(Stream stream);  // does not throw

// timing = false makes record/wait cheaper (cudaEventDisableTiming).
Event event_create(int device, bool timing = false);
void event_destroy(Event event);  // does not throw
void event_record(Event event, Stream stream);
void stream_wait_event(Stream stream, Event event);  // later work on `stream` waits for `event`
void event_synchronize(Event event);                 // the host waits
bool event_done(Event event);                        // non-blocking query
float event_elapsed_ms(Event start, Event end);      // both recorded with timing = true

}  // namespace cg::kernels::cuda
