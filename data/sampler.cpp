#include "data/sampler.h"

#include <numeric>

#include "data/random.h"
#include "util/check.h"

namespace cg::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size, const SamplerOptions& options)
    : size_(dataset_size), rank_(rank), world_(world_size), shuffle_(options.shuffle), seed_(options.seed),
      pad_(options.pad) {
  const bool drop_last = options.drop_last;
  CG_CHECK(options.pad || !drop_last, "sampler: drop_last=true cuts the order, so pad=false has no meaning with it");
  CG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "sampler: rank {} of world {}", rank,
           world_size);
  CG_CHECK(dataset_size >= 0, "sampler: negative dataset size");
  // PyTorch: ceil((N - W) / W) with drop_last and N % W != 0, else ceil(N / W). The first is
  // floor(N / W) (also for N < W, where Python's ceil gives 0), which covers N % W == 0 as well.
  num_samples_ = drop_last ? dataset_size / world_size : (dataset_size + world_size - 1) / world_size;
  // Unpadded: the positions rank, rank + W, ... below N (none when N <= rank).
  if (!pad_) num_samples_ = (dataset_size - rank + world_size - 1) / world_size;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(size_t(size_), 0);
  std::iota(order.begin(), order.end(), int64_t(0));
  if (shuffle_) {
    SampleRng rng(seed_ + uint64_t(epoch_), kShuffleStream);  // seed + epoch, as PyTorch seeds its generator
    // Fisher-Yates, back to front: every permutation equally likely.
    for (int64_t i = size_ - 1; i > 0; --i) std::swap(order[size_t(i)], order[rng.below(uint64_t(i + 1))]);
  }
  const int64_t total = pad_ ? num_samples_ * world_ : size_;
  // Pad by repeating from the start (several times over if the dataset is tiny), or truncate.
  for (size_t i = 0; order.size() < size_t(total) && size_ > 0; ++i) order.push_back(order[i]);
  order.resize(size_t(total));
  std::vector<int64_t> mine;
  mine.reserve(size_t(num_samples_));
  for (int64_t i = rank_; i < total; i += world_) mine.push_back(order[size_t(i)]);
  return mine;
}

}  // namespace cg::data
