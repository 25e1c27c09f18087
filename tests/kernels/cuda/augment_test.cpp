// The gather-and-augment kernel against data::Augmenter, bit for bit: random images with a black
// level per channel, MiniResNet's two input shapes and odd ones (1x1, 5x7, 13 channels), batches
// with repeated and unordered rows, over seeds, ranks, epochs, padding 4/1/0, flip on/off and
// augmentation off (a plain gather); outputs poisoned first.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/augment.h"
#include "kernels/cuda/augment.h"
#include "support/cuda_kernel_test.h"

namespace cg::kernels {
namespace {

using test::DeviceBuffer;

// Only the image shape and black levels matter to data::Augmenter.
class ShapeOnly : public data::Dataset {
 public:
  ShapeOnly(int c, int h, int w) : c_(c), h_(h), w_(w) {}
  int64_t size() const override { return 0; }
  int channels() const override { return c_; }
  int height() const override { return h_; }
  int width() const override { return w_; }
  int num_classes() const override { return 10; }
  std::string name() const override { return "shape-only"; }
  void get(int64_t, float*, int64_t*) const override {}
  float black_level(int channel) const override { return -0.4f - 0.25f * float(channel); }

 private:
  int c_, h_, w_;
};

struct Shape3 {
  int c, h, w;
};

TEST(CudaAugment, GatherAndAugmentMatchTheCpuBitForBit) {
  NEED_GPU();
  const Shape3 shapes[] = {{1, 28, 28}, {3, 32, 32}, {3, 5, 7}, {13, 7, 5}, {1, 1, 1}, {2, 3, 40}};
  const int64_t rows = 37;
  // Repeated rows, descending and scattered order, the first and last row.
  const std::vector<int64_t> indices = {36, 0, 5, 5, 17, 3, 36, 29, 8, 1, 22, 14, 14, 30};
  const int64_t n = int64_t(indices.size());
  uint64_t data_seed = 1;
  for (const Shape3 s : shapes) {
    const ShapeOnly ds(s.c, s.h, s.w);
    const int64_t per_image = ds.image_numel();
    const std::vector<float> images = test::random_vector<float>(size_t(rows * per_image), data_seed++);
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) labels[size_t(r)] = (r * 7 + 3) % 10;
    std::vector<float> black;
    for (int c = 0; c < s.c; ++c) black.push_back(ds.black_level(c));

    DeviceBuffer g_images(images, DType::f32), g_black(black, DType::f32), g_out(size_t(n * per_image), DType::f32);
    DeviceBuffer g_labels(size_t(rows), DType::i64), g_indices(size_t(n), DType::i64), g_out_labels(size_t(n), DType::i64);
    cuda::copy_host_to_device(g_labels.get(), labels.data(), labels.size() * sizeof(int64_t), nullptr);
    cuda::copy_host_to_device(g_indices.get(), indices.data(), indices.size() * sizeof(int64_t), nullptr);

    for (bool augment : {true, false})
      for (int padding : {4, 1, 0})
        for (bool flip : {true, false})
          for (uint64_t seed : {uint64_t(0), uint64_t(0x5eed)})
            for (int rank : {0, 3})
              for (int64_t epoch : {0, 7}) {
                const std::string where = fmt::format("{}x{}x{} augment {} padding {} flip {} seed {} rank {} epoch {}",
                                                      s.c, s.h, s.w, augment, padding, flip, seed, rank, epoch);
                const data::Augmenter augmenter(data::AugmentOptions{augment, padding, flip}, ds);
                std::vector<float> want(size_t(n * per_image));
                std::vector<int64_t> want_labels(static_cast<size_t>(n));
                for (int64_t b = 0; b < n; ++b) {
                  const int64_t row = indices[size_t(b)];
                  std::copy_n(images.begin() + row * per_image, per_image, want.begin() + b * per_image);
                  augmenter.apply(want.data() + b * per_image, data::SampleKey{seed, rank, epoch, row});
                  want_labels[size_t(b)] = labels[size_t(row)];
                }

                g_out.poison();
                const std::vector<int64_t> minus_ones(size_t(n), -1);
                cuda::copy_host_to_device(g_out_labels.get(), minus_ones.data(), size_t(n) * sizeof(int64_t), nullptr);
                cuda::GatherAugment o;
                o.augment = augment;
                o.crop_padding = padding;
                o.horizontal_flip = flip;
                o.seed = seed;
                o.rank = rank;
                o.epoch = epoch;
                cuda::gather_augment(n, g_indices.get<int64_t>(), g_images.get<float>(), g_labels.get<int64_t>(), s.c,
                                     s.h, s.w, g_black.get<float>(), o, g_out.get<float>(),
                                     g_out_labels.get<int64_t>(), nullptr);
                std::vector<int64_t> got_labels(static_cast<size_t>(n));
                cuda::copy_device_to_host(got_labels.data(), g_out_labels.get(), size_t(n) * sizeof(int64_t), nullptr);
                cuda::synchronize_stream(nullptr);

                ASSERT_TRUE(test::all_close(g_out.download(), want, test::Tolerance{0, 0})) << where;
                ASSERT_EQ(got_labels, want_labels) << where;
              }
  }
}

// Guards the test above against passing vacuously: with augmentation on, most samples of a batch
// do change (a draw of no shift and no flip has probability 1/162 at padding 4).
TEST(CudaAugment, AugmentationChangesMostSamples) {
  NEED_GPU();
  const ShapeOnly ds(3, 32, 32);
  const int64_t n = 64, per_image = ds.image_numel();
  const std::vector<float> images = test::random_vector<float>(size_t(n * per_image), 99);
  std::vector<int64_t> indices(static_cast<size_t>(n)), labels(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) indices[size_t(i)] = i;
  const std::vector<float> black(3, 0.f);
  DeviceBuffer g_images(images, DType::f32), g_black(black, DType::f32), g_out(size_t(n * per_image), DType::f32);
  DeviceBuffer g_labels(size_t(n), DType::i64), g_indices(size_t(n), DType::i64), g_out_labels(size_t(n), DType::i64);
  cuda::copy_host_to_device(g_labels.get(), labels.data(), labels.size() * sizeof(int64_t), nullptr);
  cuda::copy_host_to_device(g_indices.get(), indices.data(), indices.size() * sizeof(int64_t), nullptr);
  cuda::GatherAugment o;
  o.augment = true;
  cuda::gather_augment(n, g_indices.get<int64_t>(), g_images.get<float>(), g_labels.get<int64_t>(), 3, 32, 32,
                       g_black.get<float>(), o, g_out.get<float>(), g_out_labels.get<int64_t>(), nullptr);
  const std::vector<float> got = g_out.download();
  int changed = 0;
  for (int64_t b = 0; b < n; ++b)
    changed += !std::equal(got.begin() + b * per_image, got.begin() + (b + 1) * per_image,
                           images.begin() + b * per_image);
  EXPECT_GE(changed, n * 3 / 4);
}

}  // namespace
}  // namespace cg::kernels
