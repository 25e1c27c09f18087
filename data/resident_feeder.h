// The training set kept on the GPU (data.gpu_resident): every image is read once, normalized, and
// uploaded; each batch is then gathered and augmented on the device by one kernel
// (ops::gather_augment, engine/augment.h), so the host's work per step is one launch, with no
// synchronization. Rule: the batches are DataLoader's for the same dataset, sampler and options,
// bit for bit and in the same order: batches are counted, skipped and sized by the loader's
// EpochBatches, and augmented with the draws of util/counter_rng.h that data::Augmenter uses.
#pragma once
#include <cstddef>

#include "data/device_feeder.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "engine/runtime.h"

namespace cg::data {

class ResidentFeeder : public BatchSource {
 public:
  // Reads `train_set` (on several threads) and uploads it to `device`, failing before any reading,
  // naming the dataset and the bytes, when it does not fit. Batches are allocated and built on
  // `compute`, the stream that consumes them. Keeps references to train_set and sampler.
  ResidentFeeder(const data::Dataset& train_set, data::DistributedSampler& sampler, const data::LoaderOptions& options,
                 Device device, Stream compute);
  ~ResidentFeeder() override;
  ResidentFeeder(const ResidentFeeder&) = delete;
  ResidentFeeder& operator=(const ResidentFeeder&) = delete;

  // Sends the epoch's sample order to the device (asynchronously, once per epoch).
  void start_epoch(int64_t epoch, int64_t skip_batches) override;
  // Enqueues the next batch's gather on `compute` and returns its (not yet written) tensors.
  std::optional<DeviceBatch> next() override;
  int64_t batches_per_epoch() const override;

 private:
  void upload(const data::Dataset& train_set);

  const data::Dataset& dataset_;
  data::DistributedSampler& sampler_;
  data::LoaderOptions options_;
  Device device_;
  Stream compute_;
  Tensor images_, labels_, black_;  // the whole set on the device: [rows, c, h, w], [rows], [c]
  Tensor order_;                    // this epoch's sampled rows, int64 on the device
  runtime::PinnedBuffer order_pinned_;  // the order's host staging (an asynchronous copy needs it pinned)
  Event order_copied_;              // the staging is reusable once this completes
  int64_t epoch_ = 0, next_batch_ = 0, end_batch_ = 0;
};

}  // namespace cg::data
