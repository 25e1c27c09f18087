#include "engine/runtime.h"

#include <utility>

#include "engine/device_allocator.h"
#include "kernels/backend.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/spin.h"

namespace cg::runtime {

// Each call reaches kernels/cuda only inside `if constexpr (kCudaBuild)` (kernels/backend.h): a
// build without the CUDA backend has no device, and links without kernels/cuda.
using kernels::kCudaBuild;

int device_count() {
  if constexpr (kCudaBuild) return kernels::cuda::device_count();
  else return 0;
}

std::string describe_device(int index) {
  if constexpr (kCudaBuild) return kernels::cuda::describe_device(index);
  else return kernels::kNoCudaBackend;
}

std::string cuda_versions() {
  if constexpr (kCudaBuild) return kernels::cuda::cuda_versions();
  else return kernels::kNoCudaBackend;
}

int cudnn_version() {
  if constexpr (kernels::kCudaLibraries) return kernels::cuda::cudnn_version();
  else return 0;
}

void set_device(Device device) {
  if constexpr (kCudaBuild) {
    if (device.is_cuda()) kernels::cuda::set_device(device.index);
  }
}

void synchronize(Device device) {
  if constexpr (kCudaBuild) {
    if (device.is_cuda()) kernels::cuda::synchronize_device(device.index);
  }
}

bool is_capturing(const Stream& stream) {
  if constexpr (kCudaBuild) return stream.device().is_cuda() && kernels::cuda::stream_is_capturing(stream.handle());
  else return false;
}

void spin(const Stream& stream, double microseconds) {
  CG_CHECK(stream.device().is_cuda(), "runtime::spin needs a CUDA stream, not {}", stream.device().str());
  if constexpr (kCudaBuild) kernels::cuda::spin(microseconds, stream.handle());
}

AllocatorStats memory_stats(Device device) { return allocator_for(device).stats(); }
void reset_peak_memory(Device device) { allocator_for(device).reset_peak(); }

namespace {
// data_ is only ever non-null in a CUDA build.
void free_pinned(void* data) {
  if constexpr (kCudaBuild) {
    if (data) kernels::cuda::pinned_free(data);
  }
}
}  // namespace

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  CG_CHECK(kCudaBuild, "pinned memory: {}", kernels::kNoCudaBackend);
  if constexpr (kCudaBuild) data_ = kernels::cuda::pinned_malloc(bytes);
}

PinnedBuffer::~PinnedBuffer() { free_pinned(data_); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    free_pinned(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  *this = PinnedBuffer();  // free first: the old and new buffers need not coexist
  *this = PinnedBuffer(bytes);
}

void PinnedBuffer::check_fits(size_t bytes, const char* what) const {
  CG_CHECK(bytes <= bytes_, "{}: {} bytes do not fit in a pinned buffer of {} bytes", what, bytes, bytes_);
}

}  // namespace cg::runtime
