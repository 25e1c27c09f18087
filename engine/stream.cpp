#include "engine/stream.h"

#include <array>

#include "kernels/backend.h"
#include "kernels/cuda/stream.h"
#include "util/check.h"

namespace cg {
namespace cu = kernels::cuda;
// Streams and events of a CUDA device; without the CUDA backend (kernels/backend.h) a CPU device's
// null stream is the only stream and no event has a handle, so every call into kernels/cuda sits in
// a discarded `if constexpr (kCudaBuild)` branch there.
using kernels::kCudaBuild;

Stream Stream::create(Device device, int priority) {
  CG_CHECK(device.is_cuda(), "Stream::create: {} has no streams", device.str());
  CG_CHECK(kCudaBuild, "Stream::create on {}: {}", device.str(), kernels::kNoCudaBackend);
  Stream s;
  if constexpr (kCudaBuild) {
    s = Stream(device, cu::stream_create(device.index, priority));
    s.owner_ = std::shared_ptr<void>(s.handle_, [](void* h) { cu::stream_destroy(h); });
  }
  return s;
}

void Stream::synchronize() const {
  if constexpr (kCudaBuild) {
    if (device_.is_cuda()) cu::synchronize_stream(handle_);
  }
}

Event Event::create(Device device, EventOptions options) {
  Event e;
  if constexpr (kCudaBuild) {
    if (!device.is_cuda()) return e;
    e.handle_ = cu::event_create(device.index, options.timing);
    e.owner_ = std::shared_ptr<void>(e.handle_, [](void* h) { cu::event_destroy(h); });
  }
  return e;
}

void Event::record(const Stream& stream) {
  if constexpr (kCudaBuild) {
    if (handle_) cu::event_record(handle_, stream.handle());
  }
}
void Event::wait(const Stream& stream) const {
  if constexpr (kCudaBuild) {
    if (handle_ && stream.device().is_cuda()) cu::stream_wait_event(stream.handle(), handle_);
  }
}
void Event::synchronize() const {
  if constexpr (kCudaBuild) {
    if (handle_) cu::event_synchronize(handle_);
  }
}
bool Event::done() const {
  if constexpr (kCudaBuild) return !handle_ || cu::event_done(handle_);
  else return true;
}
float Event::elapsed_ms(const Event& start, const Event& end) {
  CG_CHECK(start.handle_ && end.handle_, "Event::elapsed_ms needs two recorded CUDA events");
  if constexpr (kCudaBuild) return cu::event_elapsed_ms(start.handle_, end.handle_);
  else return 0.f;
}

namespace {
constexpr int kMaxDevices = 16;
// Per thread, per device; a null handle is the legacy default stream.
thread_local std::array<kernels::cuda::Stream, kMaxDevices> current_handles{};
thread_local std::array<Stream, kMaxDevices> current_streams{};  // keeps created streams alive
}  // namespace

Stream current_stream(Device device) {
  if (!device.is_cuda()) return Stream();
  CG_CHECK(device.index >= 0 && device.index < kMaxDevices, "no CUDA device {}", device.str());
  if (!current_handles[size_t(device.index)]) return Stream(device, nullptr);
  return current_streams[size_t(device.index)];
}

void set_current_stream(const Stream& stream) {
  if (!stream.device().is_cuda()) return;
  const auto i = size_t(stream.device().index);
  CG_CHECK(i < kMaxDevices, "no CUDA device {}", stream.device().str());
  current_handles[i] = stream.handle();
  current_streams[i] = stream;
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}
StreamGuard::~StreamGuard() { set_current_stream(previous_); }

}  // namespace cg
