// DistributedSampler semantics (PyTorch's), augmentation determinism, and the loader's ordering,
// prefetch, skipping and error propagation.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "data/augment.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "data/synthetic.h"
#include "util/check.h"

namespace cg::data {
namespace {

TEST(DistributedSampler, WithoutShuffleRankTakesEveryWthIndex) {
  DistributedSampler s0(10, 0, 3, false, 0, false), s1(10, 1, 3, false, 0, false), s2(10, 2, 3, false, 0, false);
  EXPECT_EQ(s0.indices(), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(s1.indices(), (std::vector<int64_t>{1, 4, 7, 0}));  // padded from the start
  EXPECT_EQ(s2.indices(), (std::vector<int64_t>{2, 5, 8, 1}));
  DistributedSampler d0(10, 0, 3, false, 0, true), d2(10, 2, 3, false, 0, true);
  EXPECT_EQ(d0.indices(), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(d2.indices(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(DistributedSampler(2, 2, 4, false, 0, false).indices(), (std::vector<int64_t>{0}));
}

TEST(DistributedSampler, ShuffleIsSeededBySeedPlusEpochAndCoversTheData) {
  const int64_t n = 103;
  std::vector<DistributedSampler> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(n, r, 4, true, 7, false);
  std::set<int64_t> seen;
  for (auto& s : ranks) {
    s.set_epoch(2);
    for (int64_t i : s.indices()) seen.insert(i);
    EXPECT_EQ(s.num_samples(), 26);
  }
  EXPECT_EQ(int64_t(seen.size()), n);
  DistributedSampler a(n, 0, 1, true, 7, false), b(n, 0, 1, true, 7, false), c(n, 0, 1, true, 8, false);
  a.set_epoch(1);
  b.set_epoch(1);
  c.set_epoch(1);
  EXPECT_EQ(a.indices(), b.indices());
  EXPECT_NE(a.indices(), c.indices());
  b.set_epoch(2);
  EXPECT_NE(a.indices(), b.indices());
}

TEST(Augment, DeterministicPerKeyAndDifferentPerRank) {
  SyntheticDataset ds(4, 3, 8, 2, 1, true);
  std::vector<float> img(192), a, b, c, scratch;
  int64_t label;
  AugmentOptions o{true, 2, true};
  auto augmented = [&](uint64_t rank) {
    ds.get(0, img.data(), &label);
    bool changed = false;
    std::vector<float> out;
    for (int epoch = 0; epoch < 8 && !changed; ++epoch) {  // some epochs draw "no shift, no flip"
      std::vector<float> copy = img;
      SampleRng rng(5, rank, uint64_t(epoch), 0);
      augment_image(o, 3, 8, 8, copy.data(), rng, scratch);
      out.insert(out.end(), copy.begin(), copy.end());
      changed = copy != img;
    }
    return out;
  };
  a = augmented(0);
  b = augmented(0);
  c = augmented(1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

std::vector<Batch> drain(const Dataset& ds, int workers, int64_t skip, int64_t epoch = 3) {
  DistributedSampler sampler(ds.size(), 0, 1, true, 11, false);
  LoaderOptions o;
  o.batch_size = 8;
  o.num_workers = workers;
  o.prefetch_batches = 2;
  o.drop_last = false;
  o.augment = {true, 2, true};
  o.seed = 9;
  DataLoader loader(ds, sampler, o);
  loader.start_epoch(epoch, skip);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

TEST(DataLoader, SameBatchesWhateverTheWorkerCount) {
  SyntheticDataset ds(61, 2, 6, 3, 4, true);
  const auto ref = drain(ds, 0, 0);
  ASSERT_EQ(ref.size(), 8u);  // 61 / 8 rounded up
  EXPECT_EQ(ref.back().size, 5);
  for (int workers : {1, 3}) {
    const auto got = drain(ds, workers, 0);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].index, int64_t(i));
      EXPECT_EQ(got[i].images, ref[i].images) << "batch " << i << " with " << workers << " workers";
      EXPECT_EQ(got[i].labels, ref[i].labels);
    }
  }
  const auto skipped = drain(ds, 2, 3);
  ASSERT_EQ(skipped.size(), ref.size() - 3);
  EXPECT_EQ(skipped[0].images, ref[3].images);
  EXPECT_NE(drain(ds, 2, 0, 4)[0].labels, ref[0].labels);  // another epoch, another order
}

class FailingDataset : public SyntheticDataset {
 public:
  FailingDataset() : SyntheticDataset(40, 1, 4, 2, 0, true) {}
  void get(int64_t index, float* image, int64_t* label) const override {
    if (index == 17) throw std::runtime_error("sample 17 is corrupt");
    SyntheticDataset::get(index, image, label);
  }
};

TEST(DataLoader, WorkerErrorsSurfaceFromNext) {
  FailingDataset ds;
  for (int workers : {0, 2}) {
    DistributedSampler sampler(ds.size(), 0, 1, false, 0, true);
    LoaderOptions o;
    o.batch_size = 4;
    o.num_workers = workers;
    DataLoader loader(ds, sampler, o);
    loader.start_epoch(0);
    std::string message;
    try {
      while (loader.next()) {
      }
    } catch (const std::exception& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("sample 17 is corrupt"), std::string::npos) << workers << " workers: " << message;
  }
}

TEST(DataLoader, DestroyedMidEpochJoinsCleanly) {
  SyntheticDataset ds(400, 1, 8, 2, 0, true);
  DistributedSampler sampler(ds.size(), 0, 1, true, 0, true);
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 3;
  auto loader = std::make_unique<DataLoader>(ds, sampler, o);
  loader->start_epoch(0);
  ASSERT_TRUE(loader->next().has_value());
  loader.reset();  // must not hang or crash
  SUCCEED();
}

}  // namespace
}  // namespace cg::data
