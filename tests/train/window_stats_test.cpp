// WindowStats sums what it was given and refuses a non-finite loss, naming the step.
#include <gtest/gtest.h>

#include <limits>

#include "train/window_stats.h"

namespace cg::train {
namespace {

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
}  // namespace cg::train
