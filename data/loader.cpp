#include "data/loader.h"

#include "util/check.h"

namespace cg::data {

DataLoader::DataLoader(const Dataset& dataset, DistributedSampler& sampler, LoaderOptions options)
    : dataset_(dataset), sampler_(sampler), options_(options) {
  CG_CHECK(options.batch_size >= 1, "loader: batch size {} must be >= 1", options.batch_size);
  CG_CHECK(options.num_workers >= 0 && options.prefetch_batches >= 1, "loader: bad worker settings");
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = sampler_.num_samples(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  ready_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  done_.clear();
  failed_.clear();
  stopping_ = false;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  stop_workers();
  epoch_ = epoch;
  sampler_.set_epoch(epoch);
  order_ = sampler_.indices();
  end_ = batches_per_epoch();
  first_ = next_ = std::min(std::max<int64_t>(skip_batches, 0), end_);
  for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

Batch DataLoader::load_batch(int64_t b) const {
  const int64_t begin = b * options_.batch_size;
  const int64_t count = std::min<int64_t>(options_.batch_size, int64_t(order_.size()) - begin);
  Batch batch;
  batch.index = b;
  batch.size = count;
  batch.channels = dataset_.channels();
  batch.height = dataset_.height();
  batch.width = dataset_.width();
  const int64_t numel = dataset_.image_numel();
  batch.images.resize(size_t(count * numel));
  batch.labels.resize(size_t(count));
  std::vector<float> scratch;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = order_[size_t(begin + i)];
    float* image = batch.images.data() + i * numel;
    dataset_.get(index, image, &batch.labels[size_t(i)]);
    if (options_.augment.enabled) {
      SampleRng rng(options_.seed, uint64_t(options_.rank), uint64_t(epoch_), uint64_t(index));
      augment_image(options_.augment, batch.channels, batch.height, batch.width, image, rng, scratch);
    }
  }
  return batch;
}

void DataLoader::worker_loop(int worker) {
  const int64_t stride = options_.num_workers;
  const int64_t window = int64_t(options_.prefetch_batches) * stride;
  for (int64_t b = first_ + worker; b < end_; b += stride) {
    {
      // Stay within the prefetch window ahead of the consumer: bounded memory.
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] { return stopping_ || b < next_ + window; });
      if (stopping_) return;
    }
    std::optional<Batch> batch;
    std::exception_ptr error;
    try {
      batch = load_batch(b);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error) {
        failed_[b] = error;
      } else {
        done_[b] = std::move(*batch);
      }
    }
    ready_.notify_all();
    if (error) return;
  }
}

std::optional<Batch> DataLoader::next() {
  if (next_ >= end_) return std::nullopt;
  const int64_t b = next_;
  if (workers_.empty()) {
    ++next_;
    return load_batch(b);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [&] { return done_.count(b) || failed_.count(b); });
  if (auto f = failed_.find(b); f != failed_.end()) {
    std::exception_ptr e = f->second;
    lock.unlock();
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      throw Error(fmt::format("data loader worker failed on batch {}: {}", b, ex.what()));
    }
  }
  Batch batch = std::move(done_[b]);
  done_.erase(b);
  ++next_;
  lock.unlock();
  space_.notify_all();
  return batch;
}

}  // namespace cg::data
