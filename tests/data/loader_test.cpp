// The DataLoader: batches identical in order and content whatever the worker count, skipping
// equal to dropping, the batch count and last batch, errors from get() coming out of next(), and
// clean shutdown mid-epoch.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "data/loader.h"
#include "data/synthetic.h"
#include "util/check.h"

namespace cg::data {
namespace {

SyntheticDataset small_dataset(int64_t size = 61) {
  return SyntheticDataset({.size = size, .channels = 2, .image_size = 6, .num_classes = 3, .seed = 4});
}

struct LoaderRun {
  int workers = 0;
  int64_t skip = 0;
  int64_t epoch = 3;
  int rank = 0;
  int world = 1;
  bool drop_last = false;
};

std::vector<Batch> drain(const Dataset& ds, const LoaderRun& run) {
  DistributedSampler sampler(ds.size(), run.rank, run.world, {.shuffle = true, .seed = 11, .drop_last = false});
  LoaderOptions o;
  o.batch_size = 8;
  o.num_workers = run.workers;
  o.prefetch_batches = 2;
  o.drop_last = run.drop_last;
  o.augment = {.enabled = true, .crop_padding = 2, .horizontal_flip = true};
  o.seed = 9;
  o.rank = run.rank;
  DataLoader loader(ds, sampler, o);
  loader.start_epoch(run.epoch, run.skip);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  EXPECT_FALSE(loader.next().has_value());  // stays finished
  return out;
}

void expect_same(const std::vector<Batch>& got, const std::vector<Batch>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].index, want[i].index) << what;
    EXPECT_EQ(got[i].size, want[i].size) << what;
    EXPECT_EQ(got[i].labels, want[i].labels) << what << ", batch " << i;
    EXPECT_EQ(got[i].images, want[i].images) << what << ", batch " << i;
  }
}

// The one rule for cutting an epoch into batches, which the GPU-resident feeder follows too.
TEST(EpochBatches, CountSkipAndSizesFollowDropLast) {
  DistributedSampler sampler(23, 0, 1, {.shuffle = false, .seed = 0, .drop_last = false});
  LoaderOptions lo;
  lo.batch_size = 5;
  lo.drop_last = true;
  const EpochBatches dropping(sampler, lo);
  EXPECT_EQ(dropping.count(), 4);  // 20 images; the last 3 are dropped
  lo.drop_last = false;
  const EpochBatches keeping(sampler, lo);
  EXPECT_EQ(keeping.count(), 5);
  EXPECT_EQ(keeping.begin(4), 20);
  EXPECT_EQ(keeping.size(4), 3);  // the last, partial batch
  EXPECT_EQ(keeping.size(0), 5);
  EXPECT_EQ(keeping.first(-2), 0);  // a skip is clamped into [0, count]
  EXPECT_EQ(keeping.first(2), 2);
  EXPECT_EQ(keeping.first(9), 5);
}

TEST(DataLoader, BatchesFollowTheSamplerAndTheDataset) {
  const auto ds = small_dataset();
  const auto batches = drain(ds, {});
  ASSERT_EQ(batches.size(), 8u);  // 61 / 8 rounded up
  EXPECT_EQ(batches.back().size, 5);
  DistributedSampler sampler(ds.size(), 0, 1, {.shuffle = true, .seed = 11, .drop_last = false});
  sampler.set_epoch(3);
  const auto order = sampler.indices();
  std::vector<float> img(size_t(ds.image_numel()));
  for (size_t b = 0; b < batches.size(); ++b) {
    EXPECT_EQ(batches[b].index, int64_t(b));
    EXPECT_EQ(batches[b].channels, 2);
    EXPECT_EQ(batches[b].height, 6);
    ASSERT_EQ(batches[b].images.size(), size_t(batches[b].size * ds.image_numel()));
    for (int64_t i = 0; i < batches[b].size; ++i) {
      int64_t label;
      ds.get(order[b * 8 + size_t(i)], img.data(), &label);
      EXPECT_EQ(batches[b].labels[size_t(i)], label);
    }
  }
  LoaderRun drop;
  drop.drop_last = true;
  EXPECT_EQ(drain(ds, drop).size(), 7u);
}

TEST(DataLoader, SameBatchesWhateverTheWorkerCount) {
  const auto ds = small_dataset();
  const auto ref = drain(ds, {.workers = 0});
  for (int workers : {1, 3}) expect_same(drain(ds, {.workers = workers}), ref, std::to_string(workers) + " workers");
  // Repeated runs with several workers: timing never changes the result.
  for (int repeat = 0; repeat < 5; ++repeat) expect_same(drain(ds, {.workers = 3}), ref, "repeat");
}

TEST(DataLoader, SkippingEqualsDroppingTheFirstBatches) {
  const auto ds = small_dataset();
  const auto ref = drain(ds, {.workers = 0});
  for (int workers : {0, 2}) {
    const auto skipped = drain(ds, {.workers = workers, .skip = 3});
    expect_same(skipped, std::vector<Batch>(ref.begin() + 3, ref.end()), "skip 3");
  }
  EXPECT_TRUE(drain(ds, {.workers = 2, .skip = 100}).empty());
}

TEST(DataLoader, EpochsAndRanksSeeDifferentData) {
  const auto ds = small_dataset();
  const auto ref = drain(ds, {.workers = 2});
  EXPECT_NE(drain(ds, {.workers = 2, .epoch = 4})[0].labels, ref[0].labels);
  // Two ranks: disjoint halves of the same permutation, each augmented with its own rank.
  const auto r0 = drain(ds, {.workers = 2, .rank = 0, .world = 2});
  const auto r1 = drain(ds, {.workers = 2, .rank = 1, .world = 2});
  ASSERT_EQ(r0.size(), 4u);  // 31 samples each
  EXPECT_NE(r0[0].images, r1[0].images);
}

TEST(DataLoader, StartEpochAgainRestartsCleanly) {
  const auto ds = small_dataset(400);
  DistributedSampler sampler(ds.size(), 0, 1, {.shuffle = true, .seed = 0, .drop_last = true});
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 3;
  DataLoader loader(ds, sampler, o);
  EXPECT_EQ(loader.batches_per_epoch(), 100);
  EXPECT_FALSE(loader.next().has_value());  // no epoch started yet
  loader.start_epoch(0);
  const auto first = loader.next();
  ASSERT_TRUE(first.has_value());
  loader.next();
  loader.start_epoch(0);  // abandon the epoch mid-way and begin it again
  const auto again = loader.next();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->index, 0);
  EXPECT_EQ(again->images, first->images);
  EXPECT_EQ(sampler.epoch(), 0);
  loader.start_epoch(5);
  EXPECT_EQ(sampler.epoch(), 5);  // start_epoch drives the sampler
}

class FailingDataset : public SyntheticDataset {
 public:
  FailingDataset() : SyntheticDataset({.size = 40, .channels = 1, .image_size = 4, .num_classes = 2}) {}
  void get(int64_t index, float* image, int64_t* label) const override {
    if (index == 17) throw std::runtime_error("sample 17 is corrupt");
    if (index == 23) throw 42;  // not even a std::exception
    SyntheticDataset::get(index, image, label);
  }
};

TEST(DataLoader, ErrorsInGetSurfaceFromNextAsCgError) {
  FailingDataset ds;
  for (int workers : {0, 1, 2, 4}) {
    DistributedSampler sampler(ds.size(), 0, 1, {.shuffle = false, .seed = 0, .drop_last = true});
    LoaderOptions o;
    o.batch_size = 4;
    o.num_workers = workers;
    DataLoader loader(ds, sampler, o);
    loader.start_epoch(0);
    int64_t good = 0;
    std::string message;
    try {
      while (loader.next()) ++good;
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(good, 4) << workers << " workers";  // batches 0..3 are fine; batch 4 holds sample 17
    EXPECT_NE(message.find("sample 17 is corrupt"), std::string::npos) << workers << " workers: " << message;
    EXPECT_NE(message.find("batch 4"), std::string::npos) << message;
    EXPECT_THROW(loader.next(), Error);  // and keeps saying so

    loader.start_epoch(0, 5);  // past sample 17: batch 5 holds sample 23
    EXPECT_THROW(loader.next(), Error);
  }
}

TEST(DataLoader, DestroyedMidEpochJoinsCleanly) {
  const auto ds = small_dataset(4000);
  for (int workers : {1, 3}) {
    DistributedSampler sampler(ds.size(), 0, 1, {.shuffle = true, .seed = 0, .drop_last = true});
    LoaderOptions o;
    o.batch_size = 4;
    o.num_workers = workers;
    o.prefetch_batches = 2;
    auto loader = std::make_unique<DataLoader>(ds, sampler, o);
    loader->start_epoch(0);
    ASSERT_TRUE(loader->next().has_value());
    loader.reset();  // workers blocked on a full window must wake up and exit
  }
  // Destroyed right after start, before anything was consumed, and never started at all.
  DistributedSampler sampler(ds.size(), 0, 1, {.shuffle = true, .seed = 0, .drop_last = true});
  LoaderOptions o;
  o.num_workers = 3;
  {
    DataLoader loader(ds, sampler, o);
    loader.start_epoch(0);
  }
  { DataLoader never_started(ds, sampler, o); }
}

}  // namespace
}  // namespace cg::data
