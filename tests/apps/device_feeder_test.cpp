// The training loop's batch sources on the CPU: DeviceFeeder hands out exactly the loader's
// batches, epoch after epoch and after a mid-epoch skip; WindowStats sums what it was given and
// refuses a non-finite loss, naming the step. (The GPU path: tests/apps/cuda/.)
#include <gtest/gtest.h>

#include <limits>

#include "apps/common/device_feeder.h"
#include "apps/common/window_stats.h"
#include "data/synthetic.h"

namespace cg::apps {
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
  data::DistributedSampler s1(ds.size(), 0, 1, true, 3, true), s2(ds.size(), 0, 1, true, 3, true);
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

TEST(WindowStats, SumsLossTimesImagesAndHits) {
  WindowStats w;
  w.add(Tensor::scalar(2.0), Tensor::full({}, 3, DType::i64), 4);
  w.add(Tensor::scalar(1.0), Tensor::full({}, 1, DType::i64), 2);
  const WindowSums s = w.flush(7);
  EXPECT_DOUBLE_EQ(s.loss_sum, 2.0 * 4 + 1.0 * 2);
  EXPECT_DOUBLE_EQ(s.correct, 4);
  EXPECT_DOUBLE_EQ(s.images, 6);
  EXPECT_TRUE(w.empty());
  w.add(Tensor::scalar(std::numeric_limits<double>::quiet_NaN()), Tensor::zeros({}, DType::i64), 1);
  try {
    w.flush(12);
    FAIL() << "a NaN loss must stop training";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 12"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg::apps
