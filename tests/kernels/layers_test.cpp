// Batch norm, elementwise, pooling, linear and cross-entropy kernels against direct formulas.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

std::vector<float> randn(size_t n, uint64_t seed, double mean = 0, double sd = 1) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(gen));
  return v;
}

TEST(BatchNormKernel, TrainingForwardAndRunningStats) {
  const BatchNormShape s{4, 3, 10};
  auto x = randn(120, 1, 2.0, 3.0), gamma = randn(3, 2), beta = randn(3, 3);
  std::vector<float> rm{0.5f, -1.f, 0.f}, rv{1.f, 2.f, 0.5f};
  const auto rm0 = rm, rv0 = rv;
  auto y = test::poisoned<float>(120), mean = test::poisoned<float>(3), invstd = test::poisoned<float>(3);
  batchnorm_forward_train<float>(s, x.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rm.data(), rv.data(),
                                 y.data(), mean.data(), invstd.data());
  std::vector<float> ry(120);
  for (int c = 0; c < 3; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 10; ++j) sum += x[size_t((n * 3 + c) * 10 + j)];
    const double mu = sum / 40;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 10; ++j) sq += std::pow(x[size_t((n * 3 + c) * 10 + j)] - mu, 2);
    const double var = sq / 40;  // biased for normalization
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 10; ++j) {
        const size_t i = size_t((n * 3 + c) * 10 + j);
        ry[i] = float((x[i] - mu) / std::sqrt(var + 1e-5) * gamma[size_t(c)] + beta[size_t(c)]);
      }
    EXPECT_NEAR(mean[size_t(c)], mu, 1e-5);
    EXPECT_NEAR(rm[size_t(c)], 0.9 * rm0[size_t(c)] + 0.1 * mu, 1e-5);
    EXPECT_NEAR(rv[size_t(c)], 0.9 * rv0[size_t(c)] + 0.1 * sq / 39, 1e-4);  // unbiased
  }
  EXPECT_TRUE(test::all_close(y, ry));
}

TEST(BatchNormKernel, EvalUsesRunningStatistics) {
  const BatchNormShape s{2, 2, 3};
  auto x = randn(12, 4);
  std::vector<float> gamma{1.5f, -0.5f}, beta{0.1f, 0.2f}, rm{0.3f, -0.2f}, rv{2.0f, 0.7f};
  auto y = test::poisoned<float>(12);
  batchnorm_forward_eval<float>(s, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), 1e-5f, y.data());
  std::vector<float> ry(12);
  for (size_t i = 0; i < 12; ++i) {
    const size_t c = (i / 3) % 2;
    ry[i] = float((x[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * gamma[c] + beta[c]);
  }
  EXPECT_TRUE(test::all_close(y, ry));
}

TEST(BatchNormKernel, BitIdenticalForOneAndTwoThreads) {
  const BatchNormShape s{16, 8, 100};
  auto x = randn(12800, 5), dy = randn(12800, 6), g = randn(8, 7), b = randn(8, 8);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> y(12800), m(8), is(8), dx(12800), dg(8), dbt(8);
    batchnorm_forward_train<float>(s, x.data(), g.data(), b.data(), 1e-5f, 0.1f, nullptr, nullptr, y.data(),
                                   m.data(), is.data());
    batchnorm_backward_train<float>(s, dy.data(), x.data(), g.data(), m.data(), is.data(), dx.data(), dg.data(),
                                    dbt.data());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dg.begin(), dg.end());
    return y;
  };
  const auto one = run(1), two = run(2);
  omp_set_num_threads(2);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
}

TEST(ElementwiseKernel, ReluAddAndFriends) {
  const int64_t n = 100000;  // several parallel chunks
  auto a = randn(size_t(n), 9), b = randn(size_t(n), 10);
  auto y = test::poisoned<float>(size_t(n)), z = test::poisoned<float>(size_t(n));
  relu_forward<float>(n, a.data(), y.data());
  add_relu<float>(n, a.data(), b.data(), z.data());
  auto dx = test::poisoned<float>(size_t(n));
  relu_backward<float>(n, b.data(), y.data(), dx.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[size_t(i)], std::max(a[size_t(i)], 0.f));
    ASSERT_EQ(z[size_t(i)], std::max(a[size_t(i)] + b[size_t(i)], 0.f));
    ASSERT_EQ(dx[size_t(i)], a[size_t(i)] > 0 ? b[size_t(i)] : 0.f);
  }
  std::vector<float> acc(a);
  accumulate<float>(n, b.data(), acc.data());
  scale<float>(n, 2.f, acc.data(), acc.data());  // in place
  for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(acc[size_t(i)], 2.f * (a[size_t(i)] + b[size_t(i)]));
}

TEST(PoolLinearKernel, GlobalAveragePoolAndLinear) {
  auto x = randn(2 * 3 * 5, 11);
  auto y = test::poisoned<float>(6), dx = test::poisoned<float>(30);
  global_avg_pool_forward<float>(6, 5, x.data(), y.data());
  std::vector<float> dy{1, 2, 3, 4, 5, 6};
  global_avg_pool_backward<float>(6, 5, dy.data(), dx.data());
  for (int i = 0; i < 6; ++i) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += x[size_t(i * 5 + j)];
    EXPECT_NEAR(y[size_t(i)], s / 5, 1e-6);
    EXPECT_FLOAT_EQ(dx[size_t(i * 5 + 4)], dy[size_t(i)] / 5);
  }
  const int64_t m = 3, k = 4, n = 2;
  auto in = randn(12, 12), w = randn(8, 13), bias = randn(2, 14), g = randn(6, 15);
  auto out = test::poisoned<float>(6), din = test::poisoned<float>(12), dw = test::poisoned<float>(8),
       db = test::poisoned<float>(2);
  linear_forward<float>(m, k, n, in.data(), w.data(), bias.data(), out.data());
  linear_backward<float>(m, k, n, g.data(), in.data(), w.data(), din.data(), dw.data(), db.data());
  std::vector<float> rout(6), rdin(12, 0), rdw(8, 0), rdb(2, 0);
  for (int i = 0; i < m; ++i)
    for (int o = 0; o < n; ++o) {
      double s = bias[size_t(o)];
      for (int j = 0; j < k; ++j) {
        s += in[size_t(i * k + j)] * w[size_t(o * k + j)];
        rdin[size_t(i * k + j)] += g[size_t(i * n + o)] * w[size_t(o * k + j)];
        rdw[size_t(o * k + j)] += g[size_t(i * n + o)] * in[size_t(i * k + j)];
      }
      rout[size_t(i * n + o)] = float(s);
      rdb[size_t(o)] += g[size_t(i * n + o)];
    }
  EXPECT_TRUE(test::all_close(out, rout));
  EXPECT_TRUE(test::all_close(din, rdin));
  EXPECT_TRUE(test::all_close(dw, rdw));
  EXPECT_TRUE(test::all_close(db, rdb));
}

TEST(LossKernel, CrossEntropyIsStableAndCountsHits) {
  // Huge logits would overflow a naive exp; log-sum-exp keeps the loss finite and right.
  std::vector<float> logits{1e4f, 0.f, -1e4f, 0.f, 2.f, 1.f};
  std::vector<int64_t> labels{1, 1};
  float loss = NAN;
  auto probs = test::poisoned<float>(6);
  const int64_t hits = cross_entropy_forward<float>(2, 3, logits.data(), labels.data(), &loss, probs.data());
  const double row1 = 1e4, row2 = std::log(1 + std::exp(2.0) + std::exp(1.0)) - 2.0;
  EXPECT_NEAR(loss, (row1 + row2) / 2, 1e-2);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_EQ(hits, 1);  // row 2's argmax is class 1
  auto dl = test::poisoned<float>(6);
  cross_entropy_backward<float>(2, 3, 1.f, probs.data(), labels.data(), dl.data());
  EXPECT_NEAR(dl[1], (0.f - 1.f) / 2, 1e-6);  // p=0 at label of row 1
  EXPECT_NEAR(dl[0], 0.5f, 1e-6);
  EXPECT_NEAR(dl[3] + dl[4] + dl[5], 0.f, 1e-6);  // rows of (p - onehot) sum to zero
}

}  // namespace
}  // namespace cg::kernels::cpu
