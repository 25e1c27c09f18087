#include "train/training_data.h"

#include <algorithm>

#include "data/dataset_factory.h"
#include "data/resident_feeder.h"
#include "util/host_memory.h"
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

// What the data side holds in host memory at once, from the config alone, checked before any of it
// is allocated: the synthetic set's class templates (one image per class and split), the loader's
// window of batches and an evaluation batch. Real data sets are counted by their files as they
// load; images are padded to data.image_size batch by batch, so only the batches grow with it.
void check_data_fits_host_memory(const TrainConfig& c) {
  const bool synthetic = c.data.dataset == data::DatasetKind::synthetic;
  const double side = c.data.image_size > 0 ? double(c.data.image_size) : 32.0;  // no native size is larger
  const double channels = double(c.model.in_channels > 0 ? c.model.in_channels : 3);  // 0: resolved later, at most 3
  const double image_bytes = channels * side * side * sizeof(float);
  const double templates = synthetic ? 2.0 * double(c.model.num_classes) * image_bytes : 0.0;
  const double window = double(std::max<int64_t>(c.data.num_workers, 1)) * 4 + 2;  // loader.h's prefetch, 2 in use
  const double batches = (window * double(c.data.batch_size) + double(c.train.eval_batch_size)) * image_bytes;
  check_host_memory(
      templates + batches,
      fmt::format("data: {}batches of data.batch_size={} ({} in flight with data.num_workers={}) and "
                  "train.eval_batch_size={}, of {}x{}x{} float32 images (data.image_size={})",
                  synthetic ? fmt::format("the synthetic class templates (model.num_classes={}, per split) and ",
                                          c.model.num_classes)
                            : "",
                  c.data.batch_size, window, c.data.num_workers, c.train.eval_batch_size, channels, side, side,
                  c.data.image_size),
      "lower data.image_size, data.batch_size or data.num_workers" +
          std::string(synthetic ? ", or model.num_classes" : ""));
}

TrainingData::TrainingData(const TrainConfig& c, int rank, int world_size) : c_(c) {
  check_data_fits_host_memory(c_);
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
