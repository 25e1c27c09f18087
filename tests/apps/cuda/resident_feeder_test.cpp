// The GPU-resident training set: batches built on the device (gather + crop + flip) are bit for
// bit the CPU loader's, over two epochs, with and without augmentation, after a mid-epoch skip and
// with a last partial batch. Skips without a GPU.
#include <gtest/gtest.h>

#include "apps/common/resident_feeder.h"
#include "data/synthetic.h"
#include "kernels/cuda/device_info.h"

namespace cg::apps {
namespace {

TEST(ResidentFeeder, BatchesEqualTheLoadersBitForBit) {
  if (kernels::cuda::device_count() == 0) GTEST_SKIP() << "needs a CUDA GPU; none is visible here";
  data::SyntheticOptions so;
  so.size = 70;
  so.channels = 3;
  so.image_size = 9;
  data::SyntheticDataset ds(so);
  for (bool augment : {true, false}) {
    for (bool drop_last : {true, false}) {
      data::DistributedSampler s1(ds.size(), 1, 2, true, 5, drop_last), s2(ds.size(), 1, 2, true, 5, drop_last);
      data::LoaderOptions lo;
      lo.batch_size = 8;
      lo.num_workers = 2;
      lo.drop_last = drop_last;
      lo.augment.enabled = augment;
      lo.seed = 5;
      lo.rank = 1;
      data::DataLoader loader(ds, s1, lo);
      ResidentFeeder feeder(ds, s2, lo, Device::cuda(0), Stream());
      ASSERT_EQ(feeder.batches_per_epoch(), loader.batches_per_epoch());
      for (int64_t epoch : {0, 3}) {
        const int64_t skip = epoch == 3 ? 1 : 0;
        loader.start_epoch(epoch, skip);
        feeder.start_epoch(epoch, skip);
        int64_t b = 0;
        while (auto want = loader.next()) {
          auto got = feeder.next();
          ASSERT_TRUE(got.has_value());
          const std::string where = "augment " + std::to_string(augment) + " drop_last " + std::to_string(drop_last) +
                                    " epoch " + std::to_string(epoch) + " batch " + std::to_string(b++);
          EXPECT_EQ(got->images.to(Device::cpu()).to_vector<float>(), want->images) << where;
          EXPECT_EQ(got->labels.to(Device::cpu()).to_vector<int64_t>(), want->labels) << where;
        }
        EXPECT_FALSE(feeder.next().has_value());
      }
    }
  }
}

}  // namespace
}  // namespace cg::apps
