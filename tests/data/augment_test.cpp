// Augmentation: the crop and flip against a direct pad-then-crop reference, black padding, the
// flip rate, and determinism: a pure function of (seed, rank, epoch, index), different per rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <set>
#include <tuple>

#include "data/augment.h"

namespace cg::data {
namespace {

// A dataset of one image with distinct pixel values, for checking where pixels move.
class RampDataset : public Dataset {
 public:
  RampDataset(int channels, int height, int width) : c_(channels), h_(height), w_(width) {}
  int64_t size() const override { return 1000; }
  int channels() const override { return c_; }
  int height() const override { return h_; }
  int width() const override { return w_; }
  int num_classes() const override { return 2; }
  std::string name() const override { return "ramp"; }
  void get(int64_t index, float* image, int64_t* label) const override {
    std::iota(image, image + image_numel(), 1.0f);
    *label = 0;
  }
  float black_level(int channel) const override { return -100.0f - float(channel); }

 private:
  int c_, h_, w_;
};

std::vector<float> image_of(const Dataset& ds) {
  std::vector<float> img(size_t(ds.image_numel()));
  int64_t label;
  ds.get(0, img.data(), &label);
  return img;
}

// torchvision's RandomCrop(padding=p) then a flip, written out directly: pad with black, take the
// window at (p + dy, p + dx), mirror.
std::vector<float> reference(const Dataset& ds, const std::vector<float>& in, int p, const AugmentDraw& d) {
  const int C = ds.channels(), H = ds.height(), W = ds.width(), PH = H + 2 * p, PW = W + 2 * p;
  std::vector<float> padded(size_t(C * PH * PW)), out(in.size());
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < PH; ++y)
      for (int x = 0; x < PW; ++x) {
        const int sy = y - p, sx = x - p;
        padded[size_t((c * PH + y) * PW + x)] =
            (sy >= 0 && sy < H && sx >= 0 && sx < W) ? in[size_t((c * H + sy) * W + sx)] : ds.black_level(c);
      }
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const int ox = d.flip ? W - 1 - x : x;
        out[size_t((c * H + y) * W + x)] = padded[size_t((c * PH + y + p + d.shift_y) * PW + ox + p + d.shift_x)];
      }
  return out;
}

TEST(Augment, MatchesPadThenCropReference) {
  RampDataset ds(3, 6, 5);
  const AugmentOptions options{.enabled = true, .crop_padding = 2, .horizontal_flip = true};
  Augmenter aug(options, ds);
  const std::vector<float> original = image_of(ds);
  std::set<std::tuple<int, int, bool>> draws_seen;
  for (int64_t index = 0; index < 400; ++index) {
    const SampleKey key{3, 0, 1, index};
    const AugmentDraw d = aug.draw(key);
    ASSERT_LE(std::abs(d.shift_y), 2);
    ASSERT_LE(std::abs(d.shift_x), 2);
    draws_seen.insert({d.shift_y, d.shift_x, d.flip});
    std::vector<float> img = original;
    aug.apply(img.data(), key);
    ASSERT_EQ(img, reference(ds, original, 2, d)) << "sample " << index << " shift " << d.shift_y << ","
                                                  << d.shift_x << " flip " << d.flip;
  }
  EXPECT_EQ(draws_seen.size(), 5u * 5u * 2u);  // every window and both flips occur
}

TEST(Augment, ShiftBeyondTheImageIsAllBlack) {
  RampDataset ds(2, 3, 3);
  Augmenter aug({.enabled = true, .crop_padding = 4, .horizontal_flip = false}, ds);
  const std::vector<float> original = image_of(ds);
  int checked = 0;
  for (int64_t index = 0; index < 200; ++index) {
    const AugmentDraw d = aug.draw({0, 0, 0, index});
    if (std::abs(d.shift_x) < 3 && std::abs(d.shift_y) < 3) continue;
    std::vector<float> img = original;
    aug.apply(img.data(), {0, 0, 0, index});
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 9; ++i) ASSERT_EQ(img[size_t(c * 9 + i)], ds.black_level(c));
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(Augment, FlipsAboutHalfTheSamplesAndDisabledDoesNothing) {
  RampDataset ds(1, 4, 4);
  Augmenter flip_only({.enabled = true, .crop_padding = 0, .horizontal_flip = true}, ds);
  int flips = 0;
  for (int64_t index = 0; index < 10000; ++index) {
    const AugmentDraw d = flip_only.draw({1, 0, 0, index});
    EXPECT_EQ(d.shift_x, 0);
    flips += d.flip;
  }
  EXPECT_NEAR(flips, 5000, 250);  // 5 standard deviations
  Augmenter off({.enabled = false}, ds);
  std::vector<float> img = image_of(ds);
  off.apply(img.data(), {1, 0, 0, 0});
  EXPECT_EQ(img, image_of(ds));
}

TEST(Augment, DeterministicPerKeyAndDifferentPerRankEpochAndSeed) {
  RampDataset ds(1, 8, 8);
  Augmenter aug({.enabled = true, .crop_padding = 4, .horizontal_flip = true}, ds);
  auto draws = [&](uint64_t seed, int rank, int64_t epoch) {
    std::vector<std::tuple<int, int, bool>> out;
    for (int64_t index = 0; index < 64; ++index) {
      const AugmentDraw d = aug.draw({seed, rank, epoch, index});
      out.emplace_back(d.shift_y, d.shift_x, d.flip);
    }
    return out;
  };
  const auto base = draws(5, 0, 0);
  EXPECT_EQ(base, draws(5, 0, 0));
  EXPECT_NE(base, draws(5, 1, 0));
  EXPECT_NE(base, draws(5, 0, 1));
  EXPECT_NE(base, draws(6, 0, 0));
}

}  // namespace
}  // namespace cg::data
