// Which dataset indices this rank reads in an epoch, with the semantics of PyTorch's
// DistributedSampler: with shuffling, one permutation seeded by seed + epoch, the same on every
// rank; padded by repeating indices from the start until it splits evenly over the ranks (or, with
// drop_last, cut down to a multiple of the world size); rank r takes positions r, r+W, r+2W, ...
// Call set_epoch() every epoch, or every epoch sees the same order. World size 1 is the ordinary
// single-process sampler.
#pragma once
#include <cstdint>
#include <vector>

namespace cg::data {

struct SamplerOptions {
  bool shuffle = true;     // a new permutation every epoch (seed + epoch)
  uint64_t seed = 0;
  bool drop_last = false;  // cut the order down to a multiple of the world size instead of padding
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, const SamplerOptions& options);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  int64_t num_samples() const { return num_samples_; }  // per rank, every epoch
  std::vector<int64_t> indices() const;                 // this rank's, for the current epoch
  int rank() const { return rank_; }

 private:
  int64_t size_;
  int rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace cg::data
