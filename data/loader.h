// The data loader: worker threads read and augment samples into batches ahead of the training
// loop, within a bounded prefetch window, and hand them out strictly in order. Rule: a batch's
// contents depend only on (dataset, sampler order, seed, rank, epoch), never on the number of
// workers or on thread timing, so runs and resumes are reproducible. A worker's error comes out
// of next() as a cg::Error; destroying the loader mid-epoch stops and joins its threads.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace cg::data {

struct Batch {
  int64_t index = 0;  // position in the epoch (counting skipped batches)
  int64_t size = 0;
  int channels = 0, height = 0, width = 0;
  std::vector<float> images;    // size * channels * height * width, NCHW
  std::vector<int64_t> labels;  // size
};

struct LoaderOptions {
  int64_t batch_size = 64;
  int num_workers = 2;       // 0: load on the calling thread, inside next()
  int prefetch_batches = 4;  // per worker: at most num_workers * prefetch_batches batches in memory
  bool drop_last = true;     // drop a last, smaller batch
  AugmentOptions augment;
  uint64_t seed = 0;  // with rank, epoch and sample index: the augmentation's randomness
  int rank = 0;
};

// How one epoch of a rank's samples is cut into batches: the one rule the loader and the
// GPU-resident feeder (data/resident_feeder.h) share, so both count, skip and size batches alike.
struct EpochBatches {
  int64_t samples = 0;     // the sampler's per-rank count
  int64_t batch_size = 1;
  bool drop_last = true;   // drop a last, smaller batch

  EpochBatches(const DistributedSampler& sampler, const LoaderOptions& options)
      : samples(sampler.num_samples()), batch_size(options.batch_size), drop_last(options.drop_last) {}
  int64_t count() const { return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size; }
  // The batch an epoch resumed after `skip` batches starts with (skip clamped to [0, count()]).
  int64_t first(int64_t skip) const { return std::clamp<int64_t>(skip, 0, count()); }
  // Batch b holds the sampler's positions [begin(b), begin(b) + size(b)).
  int64_t begin(int64_t b) const { return b * batch_size; }
  int64_t size(int64_t b) const { return std::min(batch_size, samples - begin(b)); }
};

class DataLoader {
 public:
  // Keeps references to dataset and sampler: both must outlive the loader.
  DataLoader(const Dataset& dataset, DistributedSampler& sampler, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins epoch `epoch` (calls sampler.set_epoch), abandoning any epoch in progress. The first
  // `skip_batches` batches are never loaded: a resumed run continues mid-epoch this way and sees
  // exactly the batches it would have seen.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch, or nullopt when the epoch is done (or none was started). If
  // loading it failed, throws cg::Error naming the batch and the cause, and keeps doing so.
  std::optional<Batch> next();
  int64_t batches_per_epoch() const;

 private:
  Batch load_batch(int64_t b) const;
  void worker_loop(int worker);
  void stop_workers();

  const Dataset& dataset_;
  DistributedSampler& sampler_;
  LoaderOptions options_;
  Augmenter augmenter_;
  // The epoch being read: written by start_epoch before workers start, then read-only.
  std::vector<int64_t> order_;
  int64_t epoch_ = 0, first_ = 0, end_ = 0;

  std::mutex mutex_;  // guards everything below, and next_
  std::condition_variable ready_;  // a batch finished (or failed)
  std::condition_variable space_;  // the consumer moved on: the window has room
  int64_t next_ = 0;               // the batch next() hands out next
  std::map<int64_t, Batch> done_;
  std::map<int64_t, std::exception_ptr> failed_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cg::data
