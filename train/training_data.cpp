#include "train/training_data.h"

#include <algorithm>

#include "data/dataset_factory.h"
#include "data/resident_feeder.h"
#include "util/log.h"

namespace cg::train {

std::unique_ptr<data::Dataset> make_split(const TrainConfig& c, Split split) {
  const bool train = split == Split::train;
  data::DatasetOptions o;
  o.kind = c.data.dataset;
  o.path = c.data.path;
  o.train = train;
  o.image_size = int(c.data.image_size);
  o.synthetic_size = train ? c.data.synthetic_size : std::max<int64_t>(c.data.synthetic_size / 5, 1);
  o.synthetic_channels = int(c.model.in_channels);
  o.num_classes = int(c.model.num_classes);
  o.seed = uint64_t(c.train.seed);
  return data::make_dataset(o);
}

TrainingData::TrainingData(const TrainConfig& c, int rank, int world_size) : c_(c) {
  train_set_ = make_split(c_, Split::train);
  test_set_ = make_split(c_, Split::test);
  CG_CHECK(train_set_->channels() == c_.model.in_channels, "model.in_channels={} but {} images have {} channel(s)",
           c_.model.in_channels, train_set_->name(), train_set_->channels());
  log::info("data: {} train {} / test {} images, {}x{}x{}", train_set_->name(), train_set_->size(),
            test_set_->size(), train_set_->channels(), train_set_->height(), train_set_->width());
  data::SamplerOptions so;
  so.shuffle = c_.data.shuffle;
  so.seed = uint64_t(c_.train.seed);
  so.drop_last = true;
  sampler_ = std::make_unique<data::DistributedSampler>(train_set_->size(), rank, world_size, so);
  loader_options_.batch_size = c_.data.batch_size;
  loader_options_.num_workers = int(c_.data.num_workers);
  loader_options_.drop_last = true;
  loader_options_.augment.enabled = c_.data.augment;
  loader_options_.seed = uint64_t(c_.train.seed);
  loader_options_.rank = rank;  // augmentation differs per rank: seed, rank, epoch and sample
  loader_ = std::make_unique<data::DataLoader>(*train_set_, *sampler_, loader_options_);
  batches_per_epoch_ = loader_->batches_per_epoch();
  // An epoch drops its last incomplete batch, so with fewer images than one batch it would have none.
  if (batches_per_epoch_ == 0)
    throw UsageError(fmt::format("data.batch_size={} is larger than the {} training images {}; lower it",
                                 c_.data.batch_size, sampler_->num_samples(),
                                 world_size == 1 ? std::string("of the data set")
                                                 : fmt::format("each of the {} ranks reads", world_size)));
}

TrainingData::~TrainingData() = default;

std::unique_ptr<data::BatchSource> TrainingData::batch_source(Device device, const Stream& compute) {
  if (!c_.data.gpu_resident) return std::make_unique<data::DeviceFeeder>(*loader_, device, compute);
  auto feeder = std::make_unique<data::ResidentFeeder>(*train_set_, *sampler_, loader_options_, device, compute);
  log::info("data: training set resident on {}, batches built there", device.str());
  return feeder;
}

}  // namespace cg::train
