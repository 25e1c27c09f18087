#include "data/loader.h"

#include <algorithm>
#include <new>

#include "util/check.h"

namespace cg::data {
namespace {

// Rethrows a loading failure as a cg::Error that says which batch failed.
[[noreturn]] void throw_batch_error(std::exception_ptr error, int64_t batch) {
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc& e) {  // a worker's batch buffer: say so, not just "std::bad_alloc"
    throw OutOfMemory(fmt::format("data loader: loading batch {} failed: out of memory ({})", batch, e.what()));
  } catch (const std::exception& e) {
    throw Error(fmt::format("data loader: loading batch {} failed: {}", batch, e.what()));
  } catch (...) {
    throw Error(fmt::format("data loader: loading batch {} failed with a non-standard exception", batch));
  }
}

}  // namespace

DataLoader::DataLoader(const Dataset& dataset, DistributedSampler& sampler, LoaderOptions options)
    : dataset_(dataset), sampler_(sampler), options_(options), augmenter_(options.augment, dataset) {
  CG_CHECK(options.batch_size >= 1, "loader: batch size {} must be >= 1", options.batch_size);
  CG_CHECK(options.num_workers >= 0, "loader: num_workers {} must be >= 0", options.num_workers);
  CG_CHECK(options.prefetch_batches >= 1, "loader: prefetch_batches {} must be >= 1", options.prefetch_batches);
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::batches_per_epoch() const { return EpochBatches(sampler_, options_).count(); }

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
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
  const EpochBatches batches(sampler_, options_);
  end_ = batches.count();
  first_ = next_ = batches.first(skip_batches);
  for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

Batch DataLoader::load_batch(int64_t b) const {
  const EpochBatches batches(sampler_, options_);
  const int64_t begin = batches.begin(b), count = batches.size(b);
  Batch batch;
  batch.index = b;
  batch.size = count;
  batch.channels = dataset_.channels();
  batch.height = dataset_.height();
  batch.width = dataset_.width();
  const int64_t numel = dataset_.image_numel();
  batch.images.resize(size_t(count * numel));
  batch.labels.resize(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = order_[size_t(begin + i)];
    float* image = batch.images.data() + i * numel;
    dataset_.get(index, image, &batch.labels[size_t(i)]);
    augmenter_.apply(image, SampleKey{options_.seed, options_.rank, epoch_, index});
  }
  return batch;
}

void DataLoader::worker_loop(int worker) {
  // Worker w loads batches first+w, first+w+W, ...: a fixed assignment, though the contents would
  // be the same under any other since a batch is a pure function of its number.
  const int64_t stride = options_.num_workers;
  const int64_t window = int64_t(options_.prefetch_batches) * stride;
  for (int64_t b = first_ + worker; b < end_; b += stride) {
    {
      // Stay within the window ahead of the consumer: memory stays bounded. The batch the
      // consumer waits for is always inside it, so this cannot deadlock.
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
    if (error) return;  // next() reports it when the consumer reaches batch b
  }
}

std::optional<Batch> DataLoader::next() {
  if (next_ >= end_) return std::nullopt;
  const int64_t b = next_;
  if (workers_.empty()) {
    std::optional<Batch> batch;
    try {
      batch = load_batch(b);
    } catch (...) {
      throw_batch_error(std::current_exception(), b);
    }
    ++next_;
    return batch;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [&] { return done_.count(b) > 0 || failed_.count(b) > 0; });
  if (auto f = failed_.find(b); f != failed_.end()) {
    const std::exception_ptr error = f->second;
    lock.unlock();
    throw_batch_error(error, b);
  }
  Batch batch = std::move(done_[b]);
  done_.erase(b);
  ++next_;
  lock.unlock();
  space_.notify_all();
  return batch;
}

}  // namespace cg::data
