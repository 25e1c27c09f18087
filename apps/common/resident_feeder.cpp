#include "apps/common/resident_feeder.h"

#include <omp.h>

#include "engine/device_allocator.h"
#include "kernels/cuda/augment.h"

namespace cg::apps {

ResidentFeeder::ResidentFeeder(const data::Dataset& train_set, data::DistributedSampler& sampler,
                               const data::LoaderOptions& options, Device device, Stream compute)
    : dataset_(train_set), sampler_(sampler), options_(options), device_(device), compute_(std::move(compute)) {
  CG_CHECK(device.is_cuda(), "data.gpu_resident needs train.device=cuda (the model is on {})", device.str());
  CG_CHECK(options.batch_size >= 1, "loader: batch size {} must be >= 1", options.batch_size);
  const int64_t rows = train_set.size(), per_image = train_set.image_numel();
  const size_t bytes = size_t(rows * per_image) * sizeof(float);
  // Read and normalize every image on the host (in parallel: get() is thread-safe), then upload.
  Tensor host_images = Tensor::empty({rows, train_set.channels(), train_set.height(), train_set.width()});
  Tensor host_labels = Tensor::empty({rows}, DType::i64);
  float* img = host_images.data<float>();
  int64_t* lab = host_labels.data<int64_t>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) train_set.get(i, img + i * per_image, lab + i);
  try {
    StreamGuard on(compute_);
    images_ = host_images.to(device);
    labels_ = host_labels.to(device);
    std::vector<float> black;
    for (int c = 0; c < train_set.channels(); ++c) black.push_back(train_set.black_level(c));
    black_ = Tensor::from_vector(black, {int64_t(black.size())}).to(device);
  } catch (const Error& e) {
    throw Error(fmt::format("data.gpu_resident: {} ({} images, {:.1f} MiB as float32) does not fit on {}: {}",
                            train_set.name(), rows, double(bytes) / (1 << 20), device.str(), e.what()));
  }
}

int64_t ResidentFeeder::batches_per_epoch() const {
  const int64_t n = sampler_.num_samples(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void ResidentFeeder::start_epoch(int64_t epoch, int64_t skip_batches) {
  sampler_.set_epoch(epoch);
  const std::vector<int64_t> order = sampler_.indices();
  StreamGuard on(compute_);
  order_ = Tensor::from_vector(order, {int64_t(order.size())}).to(device_);
  epoch_ = epoch;
  end_batch_ = batches_per_epoch();
  next_batch_ = std::min(skip_batches, end_batch_);
}

std::optional<DeviceBatch> ResidentFeeder::next() {
  if (next_batch_ >= end_batch_) return std::nullopt;
  const int64_t first = next_batch_ * options_.batch_size;
  const int64_t n = std::min<int64_t>(options_.batch_size, order_.numel() - first);
  ++next_batch_;
  StreamGuard on(compute_);
  DeviceBatch b{Tensor::empty({n, dataset_.channels(), dataset_.height(), dataset_.width()}, DType::f32, device_),
                Tensor::empty({n}, DType::i64, device_), n};
  kernels::cuda::GatherAugment o;
  o.augment = options_.augment.enabled;
  o.crop_padding = options_.augment.crop_padding;
  o.horizontal_flip = options_.augment.horizontal_flip;
  o.seed = options_.seed;
  o.rank = options_.rank;
  o.epoch = epoch_;
  kernels::cuda::gather_augment(n, order_.data<int64_t>() + first, images_.data<float>(), labels_.data<int64_t>(),
                                dataset_.channels(), dataset_.height(), dataset_.width(), black_.data<float>(), o,
                                b.images.data<float>(), b.labels.data<int64_t>(), compute_.handle());
  return b;
}

}  // namespace cg::apps
