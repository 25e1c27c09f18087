// The data loader: worker threads read and augment samples into batches ahead of the training
// loop, through a bounded prefetch window, and hand them out strictly in order. Batch contents
// depend only on (dataset, sampler order, seed, rank, epoch), never on the number of workers or
// on thread timing, so runs and resumes are reproducible. A worker's error comes out of next().
#pragma once
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
  int64_t index = 0;  // position in the epoch
  int64_t size = 0;
  int channels = 0, height = 0, width = 0;
  std::vector<float> images;   // size * channels * height * width, NCHW
  std::vector<int64_t> labels;  // size
};

struct LoaderOptions {
  int64_t batch_size = 64;
  int num_workers = 2;       // 0: load on the calling thread
  int prefetch_batches = 4;  // per worker
  bool drop_last = true;     // drop a last, smaller batch
  AugmentOptions augment;
  uint64_t seed = 0;
  int rank = 0;
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, DistributedSampler& sampler, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins epoch `epoch` (calls sampler.set_epoch) after skipping its first `skip_batches`
  // batches, which are never loaded (a resumed run continues mid-epoch this way).
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch, or nullopt when the epoch is done.
  std::optional<Batch> next();
  int64_t batches_per_epoch() const;

 private:
  Batch load_batch(int64_t b) const;
  void worker_loop(int worker);
  void stop_workers();

  const Dataset& dataset_;
  DistributedSampler& sampler_;
  LoaderOptions options_;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0, next_ = 0, end_ = 0, first_ = 0;

  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::map<int64_t, Batch> done_;
  std::map<int64_t, std::exception_ptr> failed_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cg::data
