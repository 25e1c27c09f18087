// The training run's data: both splits of the configured dataset, this rank's sampler and loader
// over the training split, and the source the step's batches come from (the loader's batches
// copied to the device, or, with data.gpu_resident, built on the GPU from a resident copy of the
// training set).
#pragma once
#include <cstdint>
#include <memory>

#include "data/dataset.h"
#include "data/device_feeder.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "train/train_config.h"

namespace cg::train {

using Split = data::Split;
// One split of the configured dataset (the synthetic test split is a fifth of the training one).
std::unique_ptr<data::Dataset> make_split(const TrainConfig& c, Split split);

class TrainingData {
 public:
  // Reads both splits (and logs their sizes). A config that does not fit the data fails (UsageError,
  // exit 2): images with other than model.in_channels channels, or fewer training images per rank
  // than one batch.
  TrainingData(const TrainConfig& c, int rank, int world_size);
  ~TrainingData();
  TrainingData(const TrainingData&) = delete;
  TrainingData& operator=(const TrainingData&) = delete;

  // Where every epoch's batches come from, on `device` in the order of `compute` (the stream the
  // step runs on).
  std::unique_ptr<data::BatchSource> batch_source(Device device, const Stream& compute);
  const data::Dataset& test_set() const { return *test_set_; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }

 private:
  const TrainConfig c_;
  std::unique_ptr<data::Dataset> train_set_, test_set_;
  std::unique_ptr<data::DistributedSampler> sampler_;
  data::LoaderOptions loader_options_;
  std::unique_ptr<data::DataLoader> loader_;
  int64_t batches_per_epoch_ = 0;
};

}  // namespace cg::train
