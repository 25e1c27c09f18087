// The synthetic dataset: a pure function of (seed, split, index), roughly zero-mean and
// unit-variance, and learnable: a nearest-class-mean classifier fitted on the training split
// classifies the test split well.
#include <gtest/gtest.h>

#include <cmath>

#include "data/dataset_factory.h"
#include "data/synthetic.h"
#include "util/check.h"

namespace cg::data {
namespace {

std::vector<float> sample(const Dataset& ds, int64_t index, int64_t* label) {
  std::vector<float> img(size_t(ds.image_numel()));
  ds.get(index, img.data(), label);
  return img;
}

TEST(Synthetic, SampleIsAPureFunctionOfSeedSplitAndIndex) {
  SyntheticOptions o{.size = 100, .channels = 3, .image_size = 8, .num_classes = 10, .seed = 42};
  SyntheticDataset a(o), b(o);
  int64_t la, lb;
  // Read in different orders: sample 17 does not depend on what was read before.
  for (int64_t i = 0; i < 17; ++i) sample(a, i, &la);
  EXPECT_EQ(sample(a, 17, &la), sample(b, 17, &lb));
  EXPECT_EQ(la, lb);

  o.seed = 43;
  SyntheticDataset other_seed(o);
  EXPECT_NE(sample(other_seed, 17, &lb), sample(a, 17, &la));
  o.seed = 42;
  o.train = false;
  SyntheticDataset test_split(o);
  EXPECT_NE(sample(test_split, 17, &lb), sample(a, 17, &la));

  EXPECT_EQ(a.height(), 8);
  EXPECT_EQ(a.channels(), 3);
  EXPECT_THROW(sample(a, 100, &la), Error);
}

TEST(Synthetic, FactoryPassesTheOptions) {
  DatasetOptions o;
  o.kind = DatasetKind::synthetic;
  o.synthetic_size = 123;
  o.synthetic_channels = 1;
  o.num_classes = 4;
  auto ds = make_dataset(o);
  EXPECT_EQ(ds->size(), 123);
  EXPECT_EQ(ds->channels(), 1);
  EXPECT_EQ(ds->height(), 32);  // image_size 0: 32
  EXPECT_EQ(ds->num_classes(), 4);
  o.image_size = 16;
  EXPECT_EQ(make_dataset(o)->width(), 16);
}

TEST(Synthetic, ZeroMeanUnitVarianceBalancedAndLearnable) {
  const int classes = 10;
  SyntheticOptions o{.size = 2000, .channels = 3, .image_size = 8, .num_classes = classes, .seed = 1};
  SyntheticDataset train(o);
  o.train = false;
  o.size = 500;
  SyntheticDataset test(o);

  const int64_t numel = train.image_numel();
  std::vector<double> means(size_t(classes * numel), 0.0);
  std::vector<int64_t> counts(classes, 0);
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    int64_t label;
    const auto img = sample(train, i, &label);
    ASSERT_GE(label, 0);
    ASSERT_LT(label, classes);
    ++counts[size_t(label)];
    for (int64_t j = 0; j < numel; ++j) {
      means[size_t(label * numel + j)] += img[size_t(j)];
      sum += img[size_t(j)];
      sum_sq += double(img[size_t(j)]) * img[size_t(j)];
    }
  }
  const double n = double(train.size() * numel), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 1.0, 0.1);
  for (int k = 0; k < classes; ++k) {
    EXPECT_NEAR(counts[size_t(k)], 200, 60) << "class " << k;
    for (int64_t j = 0; j < numel; ++j) means[size_t(k * numel + j)] /= double(counts[size_t(k)]);
  }
  int correct = 0;
  for (int64_t i = 0; i < test.size(); ++i) {
    int64_t label;
    const auto img = sample(test, i, &label);
    int best = -1;
    double best_dist = 1e300;
    for (int k = 0; k < classes; ++k) {
      double d = 0;
      for (int64_t j = 0; j < numel; ++j) d += std::pow(img[size_t(j)] - means[size_t(k * numel + j)], 2);
      if (d < best_dist) best_dist = d, best = k;
    }
    correct += best == label;
  }
  EXPECT_GT(correct, 0.9 * test.size());  // chance is 10%
}

}  // namespace
}  // namespace cg::data
