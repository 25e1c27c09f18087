// The real Fashion-MNIST, read through the factory from its default folder (Debian's
// dataset-fashion-mnist package); skipped, naming the folder, when it is not installed.
#include <gtest/gtest.h>

#include "support/need_tool.h"

#include <cmath>
#include <filesystem>

#include "data/dataset_factory.h"
#include "data/fashion_mnist.h"

namespace cg::data {
namespace {
namespace fs = std::filesystem;

bool installed(const std::string& dir) {
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"})
    if (!fs::exists(fs::path(dir) / name) && !fs::exists(fs::path(dir) / (std::string(name) + ".gz"))) return false;
  return true;
}

TEST(FashionMnist, RealDataWhenInstalled) {
  const std::string dir = default_data_path(DatasetKind::fashion_mnist);
  NEED_TOOL(installed(dir) ? "" : "needs Fashion-MNIST in " + dir + " (apt-get install dataset-fashion-mnist)");
  DatasetOptions o;
  o.kind = DatasetKind::fashion_mnist;
  auto train = make_dataset(o);
  o.train = false;
  auto test = make_dataset(o);
  EXPECT_EQ(train->name(), "fashion_mnist");
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->channels(), 1);
  EXPECT_EQ(train->height(), 28);
  EXPECT_EQ(train->width(), 28);
  EXPECT_EQ(train->num_classes(), 10);

  // Every label in range, both splits balanced (6000 and 1000 per class), and the training
  // pixels normalized to mean ~0 and std ~1 by the published statistics.
  for (auto* ds : {train.get(), test.get()}) {
    std::vector<int64_t> counts(10, 0);
    std::vector<float> img(784);
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < ds->size(); ++i) {
      int64_t label = -1;
      ds->get(i, img.data(), &label);
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++counts[size_t(label)];
      for (float v : img) {
        sum += v;
        sum_sq += double(v) * v;
      }
    }
    for (int64_t c : counts) EXPECT_EQ(c, ds->size() / 10);
    const double n = double(ds->size()) * 784, mean = sum / n;
    EXPECT_NEAR(mean, 0.0, 0.01);
    EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 1.0, 0.01);
  }

  o.train = true;
  o.image_size = 32;
  auto padded = make_dataset(o);
  EXPECT_EQ(padded->height(), 32);
  std::vector<float> img(32 * 32);
  int64_t label;
  padded->get(0, img.data(), &label);
  EXPECT_FLOAT_EQ(img[0], -kFashionMnistMean / kFashionMnistStd);
}

}  // namespace
}  // namespace cg::data
