#include "apps/common/device_feeder.h"

#include <cstring>

#include "engine/device_copy.h"
#include "kernels/cuda/memory.h"

namespace cg::apps {

// Pinned host memory for one batch (grown when a batch is larger), and the event after the
// device copy that reads it: the buffer is refilled only once that copy is done.
struct DeviceFeeder::Slot {
  void* pinned = nullptr;
  size_t bytes = 0;
  Event copied;

  ~Slot() {
    if (pinned) kernels::cuda::pinned_free(pinned);
  }
  void reserve(size_t n) {
    if (n <= bytes) return;
    if (pinned) kernels::cuda::pinned_free(pinned);
    pinned = kernels::cuda::pinned_malloc(n);
    bytes = n;
  }
};

DeviceFeeder::DeviceFeeder(data::DataLoader& loader, Device device, Stream compute)
    : loader_(loader), device_(device), compute_(std::move(compute)) {
  if (device_.is_cuda()) {
    copy_ = Stream::create(device_);
    for (auto& s : slots_) s = std::make_unique<Slot>();
  }
}

DeviceFeeder::~DeviceFeeder() {
  if (device_.is_cuda()) copy_.synchronize();  // no copy may outlive its pinned buffer
}

void DeviceFeeder::start_epoch(int64_t epoch, int64_t skip_batches) {
  loader_.start_epoch(epoch, skip_batches);
  // The batch copied ahead is dropped unused, and its memory returns to the cache in compute-stream
  // order while the copy stream may still be writing it: compute waits for that copy first, so
  // whoever gets the memory next on compute comes after it (no host wait).
  if (ahead_ && device_.is_cuda()) ahead_ready_.wait(compute_);
  ahead_.reset();
  primed_ = false;
}

std::optional<DeviceBatch> DeviceFeeder::issue_copy() {
  std::optional<data::Batch> b = loader_.next();
  if (!b) return std::nullopt;
  const Shape image_shape{b->size, b->channels, b->height, b->width};
  if (device_.is_cpu())
    return DeviceBatch{Tensor::from_vector<float>(b->images, image_shape),
                       Tensor::from_vector<int64_t>(b->labels, {b->size}), b->size};

  Slot& slot = *slots_[next_slot_];
  next_slot_ = 1 - next_slot_;
  slot.copied.synchronize();  // its previous copy (two batches ago) has long finished
  const size_t image_bytes = b->images.size() * sizeof(float), label_bytes = b->labels.size() * sizeof(int64_t);
  slot.reserve(image_bytes + label_bytes);
  std::memcpy(slot.pinned, b->images.data(), image_bytes);
  std::memcpy(static_cast<char*>(slot.pinned) + image_bytes, b->labels.data(), label_bytes);

  // Allocated in compute-stream order, so the blocks may still be read by compute work already
  // enqueued: the copy stream first waits for everything enqueued on compute so far.
  DeviceBatch d{Tensor::empty(image_shape, DType::f32, device_), Tensor::empty({b->size}, DType::i64, device_),
                b->size};
  Event compute_so_far = Event::create(device_);
  compute_so_far.record(compute_);
  compute_so_far.wait(copy_);
  copy_bytes_async(d.images.raw_data(), slot.pinned, image_bytes, copy_);
  copy_bytes_async(d.labels.raw_data(), static_cast<char*>(slot.pinned) + image_bytes, label_bytes, copy_);
  slot.copied = Event::create(device_);
  slot.copied.record(copy_);
  ahead_ready_ = slot.copied;
  return d;
}

std::optional<DeviceBatch> DeviceFeeder::next() {
  if (device_.is_cpu()) return issue_copy();
  if (!primed_) {
    ahead_ = issue_copy();
    primed_ = true;
  }
  std::optional<DeviceBatch> current = std::move(ahead_);
  if (!current) return std::nullopt;
  ahead_ready_.wait(compute_);  // compute reads this batch only after its copy
  ahead_ = issue_copy();         // the next one travels while this one computes
  return current;
}

}  // namespace cg::apps
