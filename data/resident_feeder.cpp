#include "data/resident_feeder.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

#include "engine/augment.h"
#include "engine/device_copy.h"
#include "util/check.h"

namespace cg::data {
namespace {

// Images go up through two pinned buffers of about this size: the threads fill one while the
// other is being copied, and the host never holds a second copy of the whole set.
constexpr size_t kStagingBytes = size_t(32) << 20;

// A pinned host buffer and the event after the last copy that reads it.
struct Staging {
  runtime::PinnedBuffer buffer;
  Event copied;
  Staging(size_t bytes, Device device) : buffer(bytes), copied(Event::create(device)) {}
  ~Staging() {
    try {
      copied.synchronize();  // no copy may outlive its buffer (an error may be unwinding)
    } catch (...) {
    }
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
};

// Reads rows [first, first + count) of `dataset` on all threads (get() is thread-safe) and
// rethrows the first failure here: an exception must not escape an OpenMP region.
void read_rows(const data::Dataset& dataset, int64_t first, int64_t count, float* images, int64_t* labels) {
  const int64_t per_image = dataset.image_numel();
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t i = 0; i < count; ++i) {
    try {
      dataset.get(first + i, images + i * per_image, labels + i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

ResidentFeeder::ResidentFeeder(const data::Dataset& train_set, data::DistributedSampler& sampler,
                               const data::LoaderOptions& options, Device device, Stream compute)
    : dataset_(train_set), sampler_(sampler), options_(options), device_(device), compute_(std::move(compute)) {
  CG_CHECK(device.is_cuda(), "data.gpu_resident needs a CUDA device (the model is on {})", device.str());
  CG_CHECK(options.batch_size >= 1, "loader: batch size {} must be >= 1", options.batch_size);
  CG_CHECK(options.augment.crop_padding >= 0, "augment: crop padding {} must be >= 0", options.augment.crop_padding);
  const int64_t rows = train_set.size();
  CG_CHECK(rows > 0, "data.gpu_resident: the training set {} is empty", train_set.name());
  const size_t bytes = size_t(rows) * size_t(train_set.image_numel()) * sizeof(float) + size_t(rows) * sizeof(int64_t);
  StreamGuard on(compute_);
  // Allocate first, so a set that does not fit fails at once, before minutes of reading.
  try {
    images_ = Tensor::empty({rows, train_set.channels(), train_set.height(), train_set.width()}, DType::f32, device);
    labels_ = Tensor::empty({rows}, DType::i64, device);
  } catch (const Error& e) {
    throw Error(fmt::format(
        "data.gpu_resident: the training set {} ({} images of {}x{}x{} as float32, {} bytes = {:.1f} MiB) does not "
        "fit on {}; turn data.gpu_resident off to stream batches from the host instead. {}",
        train_set.name(), rows, train_set.channels(), train_set.height(), train_set.width(), bytes,
        double(bytes) / double(1 << 20), device.str(), e.what()));
  }
  upload(train_set);
  std::vector<float> black;
  for (int c = 0; c < train_set.channels(); ++c) black.push_back(train_set.black_level(c));
  black_ = Tensor::from_vector(black, {int64_t(black.size())}).to(device);
}

void ResidentFeeder::upload(const data::Dataset& train_set) {
  const int64_t rows = train_set.size(), per_image = train_set.image_numel();
  const size_t image_bytes = size_t(per_image) * sizeof(float);
  const int64_t chunk_rows = std::min<int64_t>(rows, std::max<int64_t>(1, int64_t(kStagingBytes / image_bytes)));
  Staging staging[2] = {{size_t(chunk_rows) * image_bytes, device_}, {size_t(chunk_rows) * image_bytes, device_}};
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  float* images = images_.data<float>();
  for (int64_t first = 0, chunk = 0; first < rows; first += chunk_rows, ++chunk) {
    Staging& s = staging[chunk % 2];
    s.copied.synchronize();  // its copy two chunks ago is done: the buffer may be refilled
    const int64_t count = std::min(chunk_rows, rows - first);
    float* staged = s.buffer.span<float>(size_t(count * per_image), "image upload staging");
    read_rows(train_set, first, count, staged, labels.data() + first);
    copy_bytes_async(images + first * per_image, staged, size_t(count) * image_bytes, compute_);
    s.copied.record(compute_);
  }
  // Synchronous (pageable source): after it, every image copy before it on compute_ is done too.
  copy_bytes(labels_.raw_data(), device_, labels.data(), Device::cpu(), labels.size() * sizeof(int64_t));
}

ResidentFeeder::~ResidentFeeder() {
  try {
    order_copied_.synchronize();  // the last order copy reads the pinned staging
  } catch (...) {
  }
}

int64_t ResidentFeeder::batches_per_epoch() const { return EpochBatches(sampler_, options_).count(); }

void ResidentFeeder::start_epoch(int64_t epoch, int64_t skip_batches) {
  sampler_.set_epoch(epoch);
  const std::vector<int64_t> order = sampler_.indices();
  const size_t bytes = order.size() * sizeof(int64_t);
  // The previous epoch's copy finished long ago (its batches depended on it); waiting is free.
  order_copied_.synchronize();
  order_pinned_.reserve(bytes);
  if (bytes > 0) std::memcpy(order_pinned_.span<int64_t>(order.size(), "epoch order staging"), order.data(), bytes);
  StreamGuard on(compute_);
  // The old order's memory returns to compute_'s cache, so the previous epoch's gathers, earlier
  // in the stream, are done with it before anything reuses it.
  order_ = Tensor::empty({int64_t(order.size())}, DType::i64, device_);
  if (bytes > 0) {
    copy_bytes_async(order_.raw_data(), order_pinned_.data(), bytes, compute_);
    order_copied_ = Event::create(device_);
    order_copied_.record(compute_);
  }
  epoch_ = epoch;
  const EpochBatches batches(sampler_, options_);
  end_batch_ = batches.count();
  next_batch_ = batches.first(skip_batches);
}

std::optional<DeviceBatch> ResidentFeeder::next() {
  if (next_batch_ >= end_batch_) return std::nullopt;
  const EpochBatches batches(sampler_, options_);
  const int64_t first = batches.begin(next_batch_), n = batches.size(next_batch_);
  ++next_batch_;
  StreamGuard on(compute_);
  DeviceBatch batch{Tensor::empty({n, dataset_.channels(), dataset_.height(), dataset_.width()}, DType::f32, device_),
                    Tensor::empty({n}, DType::i64, device_), n};
  ops::GatherAugmentOptions o;
  o.augment = options_.augment.enabled;
  o.crop_padding = options_.augment.crop_padding;
  o.horizontal_flip = options_.augment.horizontal_flip;
  o.seed = options_.seed;
  o.rank = options_.rank;
  o.epoch = epoch_;
  ops::gather_augment(order_, first, n, images_, labels_, black_, o, batch.images, batch.labels);
  return batch;
}

}  // namespace cg::data
