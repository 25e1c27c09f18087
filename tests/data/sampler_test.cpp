// DistributedSampler against PyTorch's semantics: strided split over ranks, padding from the
// start or truncation (drop_last), one permutation per (seed + epoch) shared by all ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "data/sampler.h"
#include "util/check.h"

namespace cg::data {
namespace {

std::vector<std::vector<int64_t>> all_ranks(int64_t n, int world, bool shuffle, uint64_t seed, bool drop_last,
                                            int64_t epoch = 0) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, {.shuffle = shuffle, .seed = seed, .drop_last = drop_last});
    s.set_epoch(epoch);
    out.push_back(s.indices());
    EXPECT_EQ(int64_t(out.back().size()), s.num_samples());
  }
  return out;
}

TEST(DistributedSampler, WithoutShuffleRankTakesEveryWthIndex) {
  // 10 samples over 3 ranks: padded to 12 with indices 0 and 1 (PyTorch: indices[:padding]).
  auto padded = all_ranks(10, 3, false, 0, false);
  EXPECT_EQ(padded[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(padded[1], (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(padded[2], (std::vector<int64_t>{2, 5, 8, 1}));
  // drop_last: cut to 9.
  auto dropped = all_ranks(10, 3, false, 0, true);
  EXPECT_EQ(dropped[0], (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(dropped[1], (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(dropped[2], (std::vector<int64_t>{2, 5, 8}));
  // Fewer samples than ranks: padding repeats the dataset as often as needed.
  auto tiny = all_ranks(2, 5, false, 0, false);
  EXPECT_EQ(tiny, (std::vector<std::vector<int64_t>>{{0}, {1}, {0}, {1}, {0}}));
  EXPECT_EQ(DistributedSampler(2, 1, 5, {.shuffle = false, .seed = 0, .drop_last = true}).num_samples(), 0);
}

TEST(DistributedSampler, NumSamplesMatchesPyTorch) {
  for (int64_t n : {0, 1, 7, 10, 12, 100, 101}) {
    for (int world : {1, 2, 3, 4, 8}) {
      // PyTorch: ceil((n - W) / W) with drop_last when n % W != 0, else ceil(n / W).
      const double exact = double(n) / world;
      const int64_t with_drop = n % world != 0 ? int64_t(std::ceil(double(n - world) / world)) : n / world;
      EXPECT_EQ(DistributedSampler(n, 0, world, {.shuffle = true, .seed = 0, .drop_last = false}).num_samples(), int64_t(std::ceil(exact)));
      EXPECT_EQ(DistributedSampler(n, world - 1, world, {.shuffle = true, .seed = 0, .drop_last = true}).num_samples(), std::max<int64_t>(with_drop, 0));
    }
  }
}

TEST(DistributedSampler, ShuffledRanksPartitionOnePermutation) {
  const int64_t n = 103;
  const int world = 4;
  auto ranks = all_ranks(n, world, true, 7, false, 2);
  // Interleave the ranks back into the padded permutation: its first n entries are a
  // permutation of the data, and the padding repeats its start.
  std::vector<int64_t> merged;
  for (size_t i = 0; i < ranks[0].size(); ++i)
    for (int r = 0; r < world; ++r) merged.push_back(ranks[size_t(r)][i]);
  ASSERT_EQ(merged.size(), 104u);
  std::vector<int64_t> first(merged.begin(), merged.begin() + n), sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(static_cast<size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(first, identity);  // it is shuffled
  EXPECT_EQ(merged[103], merged[0]);
  // drop_last: each index at most once over all ranks.
  std::map<int64_t, int> seen;
  for (const auto& r : all_ranks(n, world, true, 7, true, 2))
    for (int64_t i : r) ++seen[i];
  EXPECT_EQ(seen.size(), 100u);
  for (auto [index, times] : seen) EXPECT_EQ(times, 1) << index;
}

TEST(DistributedSampler, OrderIsAFunctionOfSeedPlusEpoch) {
  DistributedSampler a(50, 0, 1, {.shuffle = true, .seed = 7, .drop_last = false}), b(50, 0, 1, {.shuffle = true, .seed = 7, .drop_last = false}), c(50, 0, 1, {.shuffle = true, .seed = 8, .drop_last = false});
  a.set_epoch(1);
  b.set_epoch(1);
  c.set_epoch(1);
  EXPECT_EQ(a.indices(), b.indices());  // same seed, same epoch
  EXPECT_NE(a.indices(), c.indices());  // another seed
  const auto epoch1 = b.indices();
  b.set_epoch(2);
  EXPECT_NE(b.indices(), epoch1);  // another epoch
  b.set_epoch(1);
  EXPECT_EQ(b.indices(), epoch1);  // and back
  // Seeded by seed + epoch, as PyTorch does: (seed 7, epoch 1) is (seed 8, epoch 0).
  c.set_epoch(0);
  EXPECT_EQ(c.indices(), epoch1);
  // Without shuffling the epoch does not matter.
  DistributedSampler plain(50, 0, 1, {.shuffle = false, .seed = 7, .drop_last = false});
  const auto e0 = plain.indices();
  plain.set_epoch(5);
  EXPECT_EQ(plain.indices(), e0);
}

// Evaluation's split: no padding, so the ranks together hold every index exactly once.
TEST(DistributedSampler, UnpaddedRanksHoldEveryIndexOnce) {
  for (int64_t n : {0, 1, 2, 10, 53, 103}) {
    for (int world : {1, 2, 3, 5}) {
      std::vector<int64_t> seen;
      for (int r = 0; r < world; ++r) {
        DistributedSampler s(n, r, world, {.shuffle = true, .seed = 3, .drop_last = false, .pad = false});
        const auto mine = s.indices();
        EXPECT_EQ(int64_t(mine.size()), s.num_samples()) << n << " over " << world << ", rank " << r;
        EXPECT_EQ(int64_t(mine.size()), n / world + (r < n % world)) << n << " over " << world << ", rank " << r;
        seen.insert(seen.end(), mine.begin(), mine.end());
      }
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(size_t(n), 0);
      std::iota(all.begin(), all.end(), int64_t(0));
      EXPECT_EQ(seen, all) << n << " over " << world;
    }
  }
  // 10 over 3 without shuffling: the padded split less its two repeats.
  EXPECT_EQ(DistributedSampler(10, 1, 3, {.shuffle = false, .seed = 0, .drop_last = false, .pad = false}).indices(),
            (std::vector<int64_t>{1, 4, 7}));
  EXPECT_THROW(DistributedSampler(10, 0, 3, {.shuffle = false, .seed = 0, .drop_last = true, .pad = false}), Error);
}

TEST(DistributedSampler, RejectsBadRanks) {
  EXPECT_THROW(DistributedSampler(10, 3, 3, {.shuffle = false, .seed = 0, .drop_last = false}), Error);
  EXPECT_THROW(DistributedSampler(10, 0, 0, {.shuffle = false, .seed = 0, .drop_last = false}), Error);
  EXPECT_THROW(DistributedSampler(10, -1, 2, {.shuffle = false, .seed = 0, .drop_last = false}), Error);
}

}  // namespace
}  // namespace cg::data
