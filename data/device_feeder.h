// Moves the loader's batches to the training device without making the GPU wait for them.
// On a GPU each batch is copied into pinned host memory and from there to the device on a
// separate copy stream, one batch ahead: batch i+1 travels while batch i computes, and the compute
// stream waits for a batch's copy with an event, never the host. On the CPU a batch is simply
// wrapped as tensors.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "data/loader.h"
#include "engine/stream.h"
#include "engine/tensor.h"

namespace cg::data {

struct DeviceBatch {
  Tensor images;  // float32 [n, c, h, w]
  Tensor labels;  // int64 [n]
  int64_t size = 0;
};

// Where the training loop gets its batches: the loader through DeviceFeeder, or a dataset kept
// on the GPU (ResidentFeeder). Batches are usable in the compute stream's order.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Begins `epoch` (the sampler's set_epoch), skipping its first `skip_batches` (a resumed run).
  virtual void start_epoch(int64_t epoch, int64_t skip_batches) = 0;
  virtual std::optional<DeviceBatch> next() = 0;  // nullopt at the end of the epoch
  virtual int64_t batches_per_epoch() const = 0;
};

class DeviceFeeder : public BatchSource {
 public:
  // compute: the stream the batches are consumed on (the caller's current stream).
  DeviceFeeder(data::DataLoader& loader, Device device, Stream compute);
  ~DeviceFeeder() override;
  DeviceFeeder(const DeviceFeeder&) = delete;
  DeviceFeeder& operator=(const DeviceFeeder&) = delete;

  void start_epoch(int64_t epoch, int64_t skip_batches) override;
  std::optional<DeviceBatch> next() override;
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }

 private:
  struct Slot;  // a pinned staging buffer and the copy that uses it
  std::optional<DeviceBatch> issue_copy();

  data::DataLoader& loader_;
  Device device_;
  Stream compute_, copy_;
  std::unique_ptr<Slot> slots_[2];
  int next_slot_ = 0;
  std::optional<DeviceBatch> ahead_;  // copied (or copying) on copy_
  Event ahead_ready_;
  bool primed_ = false;
};

}  // namespace cg::data
