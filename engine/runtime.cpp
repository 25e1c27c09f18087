#include "engine/runtime.h"

#include <utility>

#include "engine/device_allocator.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/spin.h"

namespace cg::runtime {

int device_count() { return kernels::cuda::device_count(); }
std::string describe_device(int index) { return kernels::cuda::describe_device(index); }
std::string cuda_versions() { return kernels::cuda::cuda_versions(); }
int cudnn_version() { return kernels::cuda::cudnn_version(); }

void set_device(Device device) {
  if (device.is_cuda()) kernels::cuda::set_device(device.index);
}

void synchronize(Device device) {
  if (device.is_cuda()) kernels::cuda::synchronize_device(device.index);
}

bool is_capturing(const Stream& stream) {
  return stream.device().is_cuda() && kernels::cuda::stream_is_capturing(stream.handle());
}

void spin(const Stream& stream, double microseconds) {
  CG_CHECK(stream.device().is_cuda(), "runtime::spin needs a CUDA stream, not {}", stream.device().str());
  kernels::cuda::spin(microseconds, stream.handle());
}

AllocatorStats memory_stats(Device device) { return allocator_for(device).stats(); }
void reset_peak_memory(Device device) { allocator_for(device).reset_peak(); }

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) data_ = kernels::cuda::pinned_malloc(bytes);
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) kernels::cuda::pinned_free(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) kernels::cuda::pinned_free(data_);
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
