// Global average pooling, the fully-connected layer and cross-entropy against direct formulas in
// double, for float and double; cross-entropy also with huge logits and its accuracy count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

template <typename T>
std::vector<T> randn(size_t n, uint64_t seed, double sd = 1) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(0.0, sd);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(gen));
  return v;
}

template <typename T>
void check_pool(int64_t nc, int64_t hw) {
  const auto x = randn<T>(size_t(nc * hw), 1), dy = randn<T>(size_t(nc), 2);
  auto y = test::poisoned<T>(size_t(nc)), dx = test::poisoned<T>(size_t(nc * hw));
  global_avg_pool_forward<T>(nc, hw, x.data(), y.data());
  global_avg_pool_backward<T>(nc, hw, dy.data(), dx.data());
  std::vector<T> ry(static_cast<size_t>(nc)), rdx(static_cast<size_t>(nc * hw));
  for (int64_t i = 0; i < nc; ++i) {
    double s = 0;
    for (int64_t j = 0; j < hw; ++j) s += double(x[size_t(i * hw + j)]);
    ry[size_t(i)] = T(s / double(hw));
    for (int64_t j = 0; j < hw; ++j) rdx[size_t(i * hw + j)] = T(double(dy[size_t(i)]) / double(hw));
  }
  EXPECT_TRUE(test::all_close(y, ry)) << nc << "x" << hw;
  EXPECT_TRUE(test::all_close(dx, rdx)) << nc << "x" << hw;
}

TEST(PoolKernel, GlobalAveragePoolMatchesMean) {
  for (auto [nc, hw] : {std::pair<int64_t, int64_t>{6, 5}, {1, 1}, {64 * 256, 64}, {130, 49}}) {
    check_pool<float>(nc, hw);
    check_pool<double>(nc, hw);
  }
}

template <typename T>
void check_linear(int64_t m, int64_t k, int64_t n, bool with_bias, bool with_dx) {
  const auto x = randn<T>(size_t(m * k), 3), w = randn<T>(size_t(n * k), 4), b = randn<T>(size_t(n), 5);
  const auto dy = randn<T>(size_t(m * n), 6);
  auto y = test::poisoned<T>(size_t(m * n)), dx = test::poisoned<T>(size_t(m * k)),
       dw = test::poisoned<T>(size_t(n * k)), db = test::poisoned<T>(size_t(n));
  linear_forward<T>(m, k, n, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data());
  linear_backward<T>(m, k, n, dy.data(), x.data(), w.data(), with_dx ? dx.data() : nullptr, dw.data(),
                     with_bias ? db.data() : nullptr);
  std::vector<double> ry(static_cast<size_t>(m * n)), rdx(static_cast<size_t>(m * k)),
      rdw(static_cast<size_t>(n * k)), rdb(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t o = 0; o < n; ++o) {
      const double g = double(dy[size_t(i * n + o)]);
      double s = with_bias ? double(b[size_t(o)]) : 0.0;
      for (int64_t j = 0; j < k; ++j) {
        s += double(x[size_t(i * k + j)]) * double(w[size_t(o * k + j)]);
        rdx[size_t(i * k + j)] += g * double(w[size_t(o * k + j)]);
        rdw[size_t(o * k + j)] += g * double(x[size_t(i * k + j)]);
      }
      ry[size_t(i * n + o)] = s;
      rdb[size_t(o)] += g;
    }
  auto as_t = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  const test::Tolerance tol = test::tolerance_for<T>(), sum_tol{tol.atol * 10, tol.rtol * 10};
  EXPECT_TRUE(test::all_close(y, as_t(ry), sum_tol)) << m << "x" << k << "x" << n;
  if (with_dx) {
    EXPECT_TRUE(test::all_close(dx, as_t(rdx), sum_tol)) << m << "x" << k << "x" << n;
  }
  EXPECT_TRUE(test::all_close(dw, as_t(rdw), sum_tol)) << m << "x" << k << "x" << n;
  if (with_bias) {
    EXPECT_TRUE(test::all_close(db, as_t(rdb), sum_tol)) << m << "x" << k << "x" << n;
  }
}

TEST(LinearKernel, MatchesMatrixProduct) {
  // MiniResNet's head (batch 64, 256 -> 10), a tiny one, and the optional outputs left out.
  for (bool bias : {true, false})
    for (bool dx : {true, false}) {
      check_linear<float>(64, 256, 10, bias, dx);
      check_linear<double>(64, 256, 10, bias, dx);
      check_linear<float>(3, 4, 2, bias, dx);
      check_linear<double>(1, 1, 1, bias, dx);
    }
}

template <typename T>
void check_cross_entropy(int64_t n, int64_t classes, double sd) {
  const auto logits = randn<T>(size_t(n * classes), 7, sd);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = (i * 7 + 3) % classes;
  T loss = std::numeric_limits<T>::quiet_NaN();
  auto probs = test::poisoned<T>(size_t(n * classes)), dlogits = test::poisoned<T>(size_t(n * classes));
  const int64_t hits = cross_entropy_forward<T>(n, classes, logits.data(), labels.data(), &loss, probs.data());
  const T dloss = T(0.75);
  cross_entropy_backward<T>(n, classes, dloss, probs.data(), labels.data(), dlogits.data());
  double total = 0;
  int64_t ref_hits = 0;
  std::vector<T> rprobs(size_t(n * classes)), rdlogits(size_t(n * classes));
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits.data() + i * classes;
    const int64_t argmax = std::max_element(row, row + classes) - row;
    ref_hits += argmax == labels[size_t(i)];
    double lse = 0;
    for (int64_t j = 0; j < classes; ++j) lse += std::exp(double(row[j]) - double(row[argmax]));
    lse = std::log(lse) + double(row[argmax]);
    total += lse - double(row[labels[size_t(i)]]);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(double(row[j]) - lse);
      rprobs[size_t(i * classes + j)] = T(p);
      rdlogits[size_t(i * classes + j)] = T(double(dloss) * (p - (j == labels[size_t(i)])) / double(n));
    }
  }
  EXPECT_EQ(hits, ref_hits);
  EXPECT_TRUE(test::all_close(std::vector<T>{loss}, std::vector<T>{T(total / double(n))}));
  EXPECT_TRUE(test::all_close(probs, rprobs));
  EXPECT_TRUE(test::all_close(dlogits, rdlogits));
}

TEST(LossKernel, CrossEntropyMatchesLogSoftmax) {
  for (double sd : {1.0, 30.0}) {
    check_cross_entropy<float>(64, 10, sd);
    check_cross_entropy<double>(64, 10, sd);
    check_cross_entropy<float>(3, 1, sd);  // one class: loss 0, probability 1
  }
}

TEST(LossKernel, HugeLogitsStayFiniteAndCountHits) {
  // exp(1e4) overflows float and double: only log-sum-exp keeps the loss finite and right.
  std::vector<float> logits{1e4f, 0.f, -1e4f, 0.f, 2.f, 1.f, -1e4f, 1e4f, 0.f};
  std::vector<int64_t> labels{1, 1, 1};
  float loss = NAN;
  auto probs = test::poisoned<float>(9);
  const int64_t hits = cross_entropy_forward<float>(3, 3, logits.data(), labels.data(), &loss, probs.data());
  const double row0 = 1e4, row1 = std::log(1 + std::exp(2.0) + std::exp(1.0)) - 2.0, row2 = 0.0;
  ASSERT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, (row0 + row1 + row2) / 3, 1e-2);
  EXPECT_EQ(hits, 2);  // rows 1 and 2 put their maximum on the label (class 1), row 0 does not
  for (float p : probs) EXPECT_TRUE(std::isfinite(p));
  auto dl = test::poisoned<float>(9);
  cross_entropy_backward<float>(3, 3, 1.f, probs.data(), labels.data(), dl.data());
  EXPECT_NEAR(dl[0], 1.f / 3, 1e-6);   // p = 1 on a wrong class
  EXPECT_NEAR(dl[1], -1.f / 3, 1e-6);  // p = 0 on the label
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(dl[size_t(3 * i)] + dl[size_t(3 * i + 1)] + dl[size_t(3 * i + 2)], 0.f, 1e-6);
}

}  // namespace
}  // namespace cg::kernels::cpu
