// The GPU-resident training set: batches built on the device (gather + crop + flip) are bit for
// bit DataLoader's for the same sampler and options, over two epochs, with and without
// augmentation, after a mid-epoch skip, with and without a last partial batch, on a non-square
// image with a black level per channel; and a set larger than one upload chunk arrives whole.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "apps/common/resident_feeder.h"
#include "data/random.h"
#include "kernels/cuda/device_info.h"
#include "support/need_gpu.h"

namespace cg::apps {
namespace {

// Uniform noise in [-1, 1), a pure function of the index; black is a different value per channel.
class NoiseImages : public data::Dataset {
 public:
  NoiseImages(int64_t size, int c, int h, int w) : size_(size), c_(c), h_(h), w_(w) {}
  int64_t size() const override { return size_; }
  int channels() const override { return c_; }
  int height() const override { return h_; }
  int width() const override { return w_; }
  int num_classes() const override { return 10; }
  std::string name() const override { return "noise"; }
  void get(int64_t index, float* image, int64_t* label) const override {
    data::SampleRng rng(uint64_t(index), uint64_t(0x2015e));
    for (int64_t i = 0; i < image_numel(); ++i) image[i] = float(rng.uniform() * 2 - 1);
    *label = index % 10;
  }
  float black_level(int channel) const override { return -1.25f - 0.5f * float(channel); }

 private:
  int64_t size_;
  int c_, h_, w_;
};

// Runs both sources over `epochs` (skipping `skip` batches of each epoch after the first) and
// expects identical batches.
void expect_same_batches(const data::Dataset& ds, const data::LoaderOptions& lo, int world, bool drop_last,
                         const std::vector<int64_t>& epochs, int64_t skip, const std::string& what) {
  const Stream compute = Stream::create(Device::cuda(0));
  data::DistributedSampler s1(ds.size(), lo.rank, world, true, 5, drop_last), s2(ds.size(), lo.rank, world, true, 5,
                                                                                  drop_last);
  data::DataLoader loader(ds, s1, lo);
  ResidentFeeder feeder(ds, s2, lo, Device::cuda(0), compute);
  ASSERT_EQ(feeder.batches_per_epoch(), loader.batches_per_epoch()) << what;
  StreamGuard on(compute);  // reading the batches back follows their gathers on `compute`
  for (int64_t epoch : epochs) {
    const int64_t skip_here = epoch == epochs.front() ? 0 : skip;
    loader.start_epoch(epoch, skip_here);
    feeder.start_epoch(epoch, skip_here);
    int64_t b = skip_here, seen = 0;
    while (auto want = loader.next()) {
      const std::string where = what + " epoch " + std::to_string(epoch) + " batch " + std::to_string(b++);
      auto got = feeder.next();
      ASSERT_TRUE(got.has_value()) << where;
      ASSERT_EQ(got->size, want->size) << where;
      ASSERT_EQ(got->images.shape(), (Shape{want->size, ds.channels(), ds.height(), ds.width()})) << where;
      EXPECT_EQ(got->images.to(Device::cpu()).to_vector<float>(), want->images) << where;
      EXPECT_EQ(got->labels.to(Device::cpu()).to_vector<int64_t>(), want->labels) << where;
      ++seen;
    }
    EXPECT_FALSE(feeder.next().has_value()) << what;
    EXPECT_EQ(seen, loader.batches_per_epoch() - skip_here) << what;
  }
}

TEST(ResidentFeeder, BatchesEqualTheLoadersBitForBit) {
  NEED_GPU();
  const NoiseImages ds(70, 3, 7, 9);
  for (bool augment : {true, false})
    for (bool drop_last : {true, false}) {
      data::LoaderOptions lo;
      lo.batch_size = 8;
      lo.num_workers = 2;
      lo.drop_last = drop_last;
      lo.augment.enabled = augment;
      lo.seed = 5;
      lo.rank = 1;
      expect_same_batches(ds, lo, 2, drop_last, {0, 3}, 1,
                          "augment " + std::to_string(augment) + " drop_last " + std::to_string(drop_last));
    }
}

TEST(ResidentFeeder, ASetLargerThanOneUploadChunkArrivesWhole) {
  NEED_GPU();
  const NoiseImages ds(3000, 3, 32, 32);  // 36.9 MB of images: two 32 MiB staging chunks
  data::LoaderOptions lo;
  lo.batch_size = 256;
  lo.num_workers = 2;
  lo.drop_last = false;
  lo.augment.enabled = true;
  lo.augment.crop_padding = 2;
  lo.seed = 11;
  expect_same_batches(ds, lo, 1, false, {2}, 0, "3000 images of 3x32x32");
}

}  // namespace
}  // namespace cg::apps
