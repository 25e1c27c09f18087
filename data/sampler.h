// Which dataset indices this rank reads in an epoch, with the semantics of PyTorch's
// DistributedSampler: with shuffling, one permutation seeded by seed + epoch, the same on every
// rank; padded by repeating indices from the start until it splits evenly over the ranks (or, with
// drop_last, cut down to a multiple of the world size); rank r takes positions r, r+W, r+2W, ...
// Without padding (evaluation) every index is taken exactly once and ranks hold N/W rounded up or
// down, so sums over ranks count each image once, as a single process would.
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
  bool pad = true;         // false: neither pad nor cut; the last round leaves some ranks one short
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, const SamplerOptions& options);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  int64_t num_samples() const { return num_samples_; }  // this rank's, every epoch
  std::vector<int64_t> indices() const;                 // this rank's, for the current epoch
  int rank() const { return rank_; }

 private:
  int64_t size_;
  int rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  bool pad_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace cg::data
