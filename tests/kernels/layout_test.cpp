// The CPU layout kernels: the batched transpose against index arithmetic (odd sizes, tiles cut at
// the edges) and channels-last global average pooling against the NCHW kernel on the same values
// (bit-identical: both sum each channel's hw values in the same order).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/layout.h"
#include "kernels/cpu/pool.h"
#include "support/random_data.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

struct Dims {
  int64_t batches, rows, cols;
};
// Sizes around the 32-wide tiles, one row or column, and a MiniResNet activation (n, c, h*w).
const Dims kDims[] = {{1, 1, 1}, {2, 3, 5}, {3, 32, 32}, {2, 33, 65}, {1, 1, 70}, {4, 70, 1}, {2, 64, 784}};

TEST(BatchedTranspose, MovesEveryElementWhereTheIndicesSay) {
  uint64_t seed = 1;
  for (const Dims& d : kDims) {
    const size_t n = size_t(d.batches * d.rows * d.cols);
    const auto src = test::random_vector<double>(n, seed++);
    auto dst = test::poisoned<double>(n);
    batched_transpose<double>(d.batches, d.rows, d.cols, src.data(), dst.data());
    std::vector<double> ref(n);
    for (int64_t b = 0; b < d.batches; ++b)
      for (int64_t i = 0; i < d.rows; ++i)
        for (int64_t j = 0; j < d.cols; ++j)
          ref[size_t((b * d.cols + j) * d.rows + i)] = src[size_t((b * d.rows + i) * d.cols + j)];
    EXPECT_EQ(dst, ref) << d.batches << "x" << d.rows << "x" << d.cols;
    // And back: the inverse transpose swaps rows and cols.
    auto back = test::poisoned<double>(n);
    batched_transpose<double>(d.batches, d.cols, d.rows, dst.data(), back.data());
    EXPECT_EQ(back, src);
  }
}

TEST(GlobalAvgPoolNhwc, IsBitIdenticalToNchwOnTransposedValues) {
  struct Case {
    int64_t n, c, hw;
  };
  uint64_t seed = 20;
  for (const Case& k : {Case{1, 1, 1}, Case{3, 5, 7}, Case{4, 64, 49}, Case{2, 256, 64}}) {
    const size_t size = size_t(k.n * k.c * k.hw);
    const auto x_nchw = test::random_vector<float>(size, seed++);
    std::vector<float> x_nhwc(size);
    batched_transpose<float>(k.n, k.c, k.hw, x_nchw.data(), x_nhwc.data());
    auto y_nchw = test::poisoned<float>(size_t(k.n * k.c)), y_nhwc = y_nchw;
    global_avg_pool_forward<float>(k.n * k.c, k.hw, x_nchw.data(), y_nchw.data());
    global_avg_pool_nhwc_forward<float>(k.n, k.hw, k.c, x_nhwc.data(), y_nhwc.data());
    EXPECT_EQ(y_nhwc, y_nchw) << "forward n" << k.n << " c" << k.c << " hw" << k.hw;

    const auto dy = test::random_vector<float>(size_t(k.n * k.c), seed++);
    auto dx_nchw = test::poisoned<float>(size), dx_nhwc = dx_nchw;
    global_avg_pool_backward<float>(k.n * k.c, k.hw, dy.data(), dx_nchw.data());
    global_avg_pool_nhwc_backward<float>(k.n, k.hw, k.c, dy.data(), dx_nhwc.data());
    std::vector<float> dx_nhwc_as_nchw(size);
    batched_transpose<float>(k.n, k.hw, k.c, dx_nhwc.data(), dx_nhwc_as_nchw.data());
    EXPECT_EQ(dx_nhwc_as_nchw, dx_nchw) << "backward n" << k.n << " c" << k.c << " hw" << k.hw;
  }
}

}  // namespace
}  // namespace cg::kernels::cpu
