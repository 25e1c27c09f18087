// The training set kept on the GPU (data.gpu_resident): every image is read once, normalized, and
// uploaded; each batch is then gathered and augmented on the device by one kernel
// (kernels/cuda/augment.h), so the host's work per step is a launch. Batches are the ones
// DataLoader would give for the same sampler and options, bit for bit.
#pragma once
#include "apps/common/device_feeder.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"

namespace cg::apps {

class ResidentFeeder : public BatchSource {
 public:
  // Uploads `train_set` to `device` (fails, naming the dataset and the bytes, when it does not
  // fit); batches are allocated and built on `compute`.
  ResidentFeeder(const data::Dataset& train_set, data::DistributedSampler& sampler, const data::LoaderOptions& options,
                 Device device, Stream compute);

  void start_epoch(int64_t epoch, int64_t skip_batches) override;
  std::optional<DeviceBatch> next() override;
  int64_t batches_per_epoch() const override;

 private:
  const data::Dataset& dataset_;
  data::DistributedSampler& sampler_;
  data::LoaderOptions options_;
  Device device_;
  Stream compute_;
  Tensor images_, labels_, black_;  // the whole set, [rows, c, h, w], [rows], [c]
  Tensor order_;                    // this epoch's sampled rows, int64 on the device
  int64_t epoch_ = 0, next_batch_ = 0, end_batch_ = 0;
};

}  // namespace cg::apps
