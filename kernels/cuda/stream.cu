#include "kernels/cuda/check.h"
#include "kernels/cuda/stream.h"

namespace cg::kernels::cuda {

void set_device(int device) { CG_CUDA_CHECK(cudaSetDevice(device)); }
int current_device() {
  int device = 0;
  CG_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

Stream stream_create(int device, int priority) {
  CG_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;  // "greatest" priority is the numerically smallest
  CG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int p = priority < 0 ? greatest : least;
  cudaStream_t s = nullptr;
  CG_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, p));
  return s;
}
void stream_destroy(Stream stream) {
  if (stream) CG_CUDA_CHECK_NOTHROW(cudaStreamDestroy(static_cast<cudaStream_t>(stream)));
}

Event event_create(int device, bool timing) {
  CG_CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  CG_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}
void event_destroy(Event event) {
  if (event) CG_CUDA_CHECK_NOTHROW(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
}
void event_record(Event event, Stream stream) {
  CG_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}
void stream_wait_event(Stream stream, Event event) {
  CG_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}
void event_synchronize(Event event) { CG_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }
bool event_done(Event event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) return false;
  CG_CUDA_CHECK_RESULT(e, "cudaEventQuery");
  return true;
}
float event_elapsed_ms(Event start, Event end) {
  float ms = 0.f;
  CG_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

}  // namespace cg::kernels::cuda
