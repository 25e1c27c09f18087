// The training loop's batch source on the CPU: DeviceFeeder hands out exactly the loader's
// batches, epoch after epoch and after a mid-epoch skip. (The GPU path: tests/data/cuda/.)
#include <gtest/gtest.h>

#include "data/device_feeder.h"
#include "data/synthetic.h"

namespace cg::data {
namespace {

data::SyntheticOptions tiny() {
  data::SyntheticOptions o;
  o.size = 40;
  o.channels = 2;
  o.image_size = 4;
  return o;
}

TEST(DeviceFeeder, OnTheCpuHandsOutTheLoadersBatches) {
  data::SyntheticDataset ds(tiny());
  data::DistributedSampler s1(ds.size(), 0, 1, {.shuffle = true, .seed = 3, .drop_last = true}), s2(ds.size(), 0, 1, {.shuffle = true, .seed = 3, .drop_last = true});
  data::LoaderOptions lo;
  lo.batch_size = 8;
  lo.num_workers = 2;
  lo.augment.enabled = true;
  data::DataLoader reference(ds, s1, lo), through(ds, s2, lo);
  DeviceFeeder feeder(through, Device::cpu(), Stream());
  EXPECT_EQ(feeder.batches_per_epoch(), 5);
  for (int64_t epoch : {0, 1}) {
    const int64_t skip = epoch == 1 ? 2 : 0;
    reference.start_epoch(epoch, skip);
    feeder.start_epoch(epoch, skip);
    int64_t count = 0;
    while (auto want = reference.next()) {
      auto got = feeder.next();
      ASSERT_TRUE(got.has_value()) << "epoch " << epoch << " batch " << count;
      EXPECT_EQ(got->size, want->size);
      EXPECT_EQ(got->images.shape(), (Shape{8, 2, 4, 4}));
      EXPECT_EQ(got->images.to_vector<float>(), want->images);
      EXPECT_EQ(got->labels.to_vector<int64_t>(), want->labels);
      ++count;
    }
    EXPECT_FALSE(feeder.next().has_value());
    EXPECT_EQ(count, 5 - skip);
  }
}

}  // namespace
}  // namespace cg::data
