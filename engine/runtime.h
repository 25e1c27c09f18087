// The device runtime as the layers above the engine see it (nn/, data/, dist/, apps/): which GPUs
// there are, waiting for one, memory statistics and pinned host memory. Everything here is plain
// C++ over the engine's own types (Device, Stream); no CUDA header and no kernels/ header leaks
// out, so an upper layer never needs to name a kernel.
// Safe on a machine without a GPU: device_count() is 0 and describe_device() says why.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/caching_allocator.h"
#include "engine/device.h"
#include "engine/stream.h"
#include "util/check.h"

namespace cg::runtime {

// Number of usable CUDA devices: 0 without CUDA in the build, without a driver or without a GPU.
int device_count();
// One line naming device `index` (name, compute capability, memory), or why there is none.
std::string describe_device(int index);
// "runtime 13.0, driver 13.0" (or why there is none), for reports.
std::string cuda_versions();
int cudnn_version();  // e.g. 91900; 0 without cuDNN

// Makes `device` current for this thread's later runtime calls (a no-op for the CPU).
void set_device(Device device);
// The host waits for all work on `device` (every stream); a no-op for the CPU.
void synchronize(Device device);
// Whether `stream` is being captured into a CUDA graph right now (its work is recorded, not run,
// so nothing may wait for an event recorded on it). Always false on the CPU.
bool is_capturing(const Stream& stream);
// Occupies `stream` for `microseconds` (one GPU thread spins on the device clock): stands in for
// communication of a known duration (the modeled data-parallel backend).
void spin(const Stream& stream, double microseconds);

// How the caching allocator of `device` is doing (the host's for the CPU).
AllocatorStats memory_stats(Device device);
void reset_peak_memory(Device device);  // peak = in use now: measure the peak of what follows

// Page-locked host memory, which asynchronous host<->GPU copies need: owned, freed on
// destruction, movable. Accesses through span() are checked against the size.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;  // empty: no memory, size 0
  explicit PinnedBuffer(size_t bytes);  // throws cg::Error when the runtime cannot provide it
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return bytes_; }
  // The first `count` elements as T; fails (naming `what`) when they do not fit in the buffer.
  template <typename T>
  T* span(size_t count, const char* what = "pinned buffer") {
    check_fits(count * sizeof(T), what);
    return static_cast<T*>(data_);
  }
  // Keeps the buffer when it already holds `bytes`, else replaces it by a larger one (the old
  // contents are not kept, and the old memory is freed at once: no asynchronous copy may still
  // use it). Callers that reuse one buffer for varying sizes call this first.
  void reserve(size_t bytes);
  void check_fits(size_t bytes, const char* what) const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cg::runtime
