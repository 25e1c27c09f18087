// DeviceFeeder on the GPU: batches equal the loader's; and start_epoch, which drops the batch
// copied ahead, lets no later compute-stream allocation of its memory be overwritten by that copy.
// The copy is held back behind a spin kernel on the compute stream, so without the wait it would
// land after a new tensor in the dropped batch's block was filled. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "apps/common/device_feeder.h"
#include "data/synthetic.h"
#include "engine/runtime.h"
#include "support/gpu_ops.h"

namespace cg::apps {
namespace {

using test::kGpu;

data::SyntheticOptions images(int side) {
  data::SyntheticOptions o;
  o.size = 1024;
  o.channels = 3;
  o.image_size = side;
  return o;
}

TEST(CudaDeviceFeeder, HandsOutTheLoadersBatches) {
  NEED_GPU();
  data::SyntheticDataset ds(images(8));
  data::DistributedSampler s1(ds.size(), 0, 1, true, 3, true), s2(ds.size(), 0, 1, true, 3, true);
  data::LoaderOptions lo;
  lo.batch_size = 64;
  data::DataLoader reference(ds, s1, lo), through(ds, s2, lo);
  const Stream compute = Stream::create(kGpu);
  StreamGuard on(compute);
  DeviceFeeder feeder(through, kGpu, compute);
  reference.start_epoch(0, 0);
  feeder.start_epoch(0, 0);
  int64_t count = 0;
  while (auto want = reference.next()) {
    auto got = feeder.next();
    ASSERT_TRUE(got.has_value()) << count;
    EXPECT_EQ(test::host_f32(got->images), want->images) << count;
    EXPECT_EQ(got->labels.to(Device::cpu()).to_vector<int64_t>(), want->labels) << count;
    ++count;
  }
  EXPECT_FALSE(feeder.next().has_value());
  EXPECT_EQ(count, 16);
}

TEST(CudaDeviceFeeder, ANewEpochWaitsForTheDroppedBatchsCopy) {
  NEED_GPU();
  data::SyntheticDataset ds(images(96));  // 256 images of 3x96x96: 28 MB a batch, a copy of ms
  data::DistributedSampler sampler(ds.size(), 0, 1, false, 0, true);
  data::LoaderOptions lo;
  lo.batch_size = 256;
  data::DataLoader loader(ds, sampler, lo);
  const Stream compute = Stream::create(kGpu);
  StreamGuard on(compute);
  DeviceFeeder feeder(loader, kGpu, compute);
  feeder.start_epoch(0, 0);
  // Both copies that next() issues wait for the compute work enqueued so far: this spin.
  runtime::spin(compute, 200'000);
  auto first = feeder.next();  // the second batch is now copying ahead, behind the spin
  ASSERT_TRUE(first.has_value());
  feeder.start_epoch(1, 0);  // drops it
  // Same size, same stream: the dropped batch's block, if the cache hands it out again.
  Tensor reused = Tensor::empty(first->images.shape(), DType::f32, kGpu);
  reused.fill_(7.0);
  const std::vector<float> got = test::host_f32(reused);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == 7.0f; }))
      << "the dropped batch's copy overwrote memory that compute had been given again";
  auto again = feeder.next();  // the new epoch starts normally
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->images.shape(), first->images.shape());
}

}  // namespace
}  // namespace cg::apps
