// Batch norm kernels against the formulas written out in double: training and eval forward (with
// and without the fused ReLU), running-statistics updates (unbiased variance), both backward
// passes, and bit-identical results for 1 and 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/batch_norm.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

template <typename T>
std::vector<T> randn(size_t n, uint64_t seed, double mean = 0, double sd = 1) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(gen));
  return v;
}

// hw = 1, hw not a multiple of the 16-lane sums, one image, and a real MiniResNet layer.
const BatchNormShape kShapes[] = {{4, 3, 10}, {3, 5, 1}, {1, 2, 37}, {2, 64, 1024}};

// Per-channel batch statistics in double, from the definition.
struct Stats {
  std::vector<double> mean, var;  // var is biased (divided by m)
};
template <typename T>
Stats batch_stats(const BatchNormShape& s, const std::vector<T>& x) {
  Stats st{std::vector<double>(size_t(s.c)), std::vector<double>(size_t(s.c))};
  const double m = double(s.n * s.hw);
  for (int64_t c = 0; c < s.c; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t j = 0; j < s.hw; ++j) sum += double(x[size_t((n * s.c + c) * s.hw + j)]);
    const double mu = sum / m;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t j = 0; j < s.hw; ++j) sq += std::pow(double(x[size_t((n * s.c + c) * s.hw + j)]) - mu, 2);
    st.mean[size_t(c)] = mu;
    st.var[size_t(c)] = sq / m;
  }
  return st;
}

int64_t channel_of(const BatchNormShape& s, size_t i) { return int64_t(i) / s.hw % s.c; }

template <typename T>
void check_training(const BatchNormShape& s, Activation act) {
  const size_t size = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  const double eps = 1e-5, momentum = 0.1, m = double(s.n * s.hw);
  const auto x = randn<T>(size, 1, 2.0, 3.0), gamma = randn<T>(c, 2), beta = randn<T>(c, 3);
  const auto dy = randn<T>(size, 4);
  auto rm = randn<T>(c, 5), rv = randn<T>(c, 6, 2.0, 0.1);
  const auto rm0 = rm, rv0 = rv;
  auto y = test::poisoned<T>(size), mean = test::poisoned<T>(c), invstd = test::poisoned<T>(c);
  batch_norm_forward_train<T>(s, x.data(), gamma.data(), beta.data(), T(eps), T(momentum), rm.data(), rv.data(),
                             y.data(), mean.data(), invstd.data(), act);
  auto dx = test::poisoned<T>(size), dgamma = test::poisoned<T>(c), dbeta = test::poisoned<T>(c);
  batch_norm_backward_train<T>(s, dy.data(), x.data(), gamma.data(), mean.data(), invstd.data(), dx.data(),
                              dgamma.data(), dbeta.data(), act == Activation::relu ? y.data() : nullptr);

  const Stats st = batch_stats(s, x);
  std::vector<T> ry(size), rmean(c), rinvstd(c), rrm(c), rrv(c), rdx(size), rdgamma(c), rdbeta(c);
  std::vector<double> g(size), xhat(size), sum_g(c), sum_g_xhat(c);
  for (size_t ch = 0; ch < c; ++ch) {
    rmean[ch] = T(st.mean[ch]);
    rinvstd[ch] = T(1 / std::sqrt(st.var[ch] + eps));
    rrm[ch] = T((1 - momentum) * double(rm0[ch]) + momentum * st.mean[ch]);
    const double unbiased = m > 1 ? st.var[ch] * m / (m - 1) : st.var[ch];  // PyTorch's running_var
    rrv[ch] = T((1 - momentum) * double(rv0[ch]) + momentum * unbiased);
  }
  for (size_t i = 0; i < size; ++i) {
    const size_t ch = size_t(channel_of(s, i));
    xhat[i] = (double(x[i]) - st.mean[ch]) / std::sqrt(st.var[ch] + eps);
    const double out = xhat[i] * double(gamma[ch]) + double(beta[ch]);
    ry[i] = T(act == Activation::relu ? std::max(out, 0.0) : out);
    // ReLU's backward first, masked by the output the kernel produced (its contract: relu_y > 0).
    g[i] = act == Activation::relu && !(y[i] > 0) ? 0.0 : double(dy[i]);
    sum_g[ch] += g[i];
    sum_g_xhat[ch] += g[i] * xhat[i];
  }
  for (size_t i = 0; i < size; ++i) {
    const size_t ch = size_t(channel_of(s, i));
    // d/dx of gamma * xhat + beta through the batch mean and variance.
    rdx[i] = T(double(gamma[ch]) / std::sqrt(st.var[ch] + eps) *
               (g[i] - sum_g[ch] / m - xhat[i] * sum_g_xhat[ch] / m));
  }
  for (size_t ch = 0; ch < c; ++ch) {
    rdgamma[ch] = T(sum_g_xhat[ch]);
    rdbeta[ch] = T(sum_g[ch]);
  }
  const std::string what = "shape " + std::to_string(s.n) + "x" + std::to_string(s.c) + "x" +
                           std::to_string(s.hw) + (act == Activation::relu ? " relu" : "");
  EXPECT_TRUE(test::all_close(y, ry)) << what << " y";
  EXPECT_TRUE(test::all_close(mean, rmean)) << what << " save_mean";
  EXPECT_TRUE(test::all_close(invstd, rinvstd)) << what << " save_invstd";
  EXPECT_TRUE(test::all_close(rm, rrm)) << what << " running_mean";
  EXPECT_TRUE(test::all_close(rv, rrv)) << what << " running_var (unbiased)";
  // Gradients are sums over up to 2048 values per channel: allow for their rounding.
  const test::Tolerance tol = test::tolerance_for<T>(), sum_tol{tol.atol * 10, tol.rtol * 10};
  EXPECT_TRUE(test::all_close(dx, rdx, sum_tol)) << what << " dx";
  EXPECT_TRUE(test::all_close(dgamma, rdgamma, sum_tol)) << what << " dgamma";
  EXPECT_TRUE(test::all_close(dbeta, rdbeta, sum_tol)) << what << " dbeta";
}

template <typename T>
void check_eval(const BatchNormShape& s, Activation act) {
  const size_t size = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  const double eps = 1e-5;
  const auto x = randn<T>(size, 7), gamma = randn<T>(c, 8), beta = randn<T>(c, 9), dy = randn<T>(size, 10);
  const auto rm = randn<T>(c, 11), rv = randn<T>(c, 12, 1.5, 0.3);
  auto y = test::poisoned<T>(size);
  batch_norm_forward_eval<T>(s, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), T(eps), y.data(), act);
  auto dx = test::poisoned<T>(size), dgamma = test::poisoned<T>(c), dbeta = test::poisoned<T>(c);
  batch_norm_backward_eval<T>(s, dy.data(), x.data(), gamma.data(), rm.data(), rv.data(), T(eps), dx.data(),
                             dgamma.data(), dbeta.data(), act == Activation::relu ? y.data() : nullptr);
  std::vector<T> ry(size), rdx(size);
  std::vector<double> sum_g(c), sum_g_xhat(c);
  for (size_t i = 0; i < size; ++i) {
    const size_t ch = size_t(channel_of(s, i));
    const double invstd = 1 / std::sqrt(double(rv[ch]) + eps);
    const double xhat = (double(x[i]) - double(rm[ch])) * invstd;
    const double out = xhat * double(gamma[ch]) + double(beta[ch]);
    ry[i] = T(act == Activation::relu ? std::max(out, 0.0) : out);
    const double g = act == Activation::relu && !(y[i] > 0) ? 0.0 : double(dy[i]);
    rdx[i] = T(g * double(gamma[ch]) * invstd);  // statistics are constants in eval
    sum_g[ch] += g;
    sum_g_xhat[ch] += g * xhat;
  }
  EXPECT_TRUE(test::all_close(y, ry));
  EXPECT_TRUE(test::all_close(dx, rdx));
  const test::Tolerance tol = test::tolerance_for<T>(), sum_tol{tol.atol * 10, tol.rtol * 10};
  EXPECT_TRUE(test::all_close(dgamma, std::vector<T>(sum_g_xhat.begin(), sum_g_xhat.end()), sum_tol));
  EXPECT_TRUE(test::all_close(dbeta, std::vector<T>(sum_g.begin(), sum_g.end()), sum_tol));
}

TEST(BatchNormKernel, TrainingMatchesFormulasFloat) {
  for (const auto& s : kShapes)
    for (Activation act : {Activation::none, Activation::relu}) check_training<float>(s, act);
}
TEST(BatchNormKernel, TrainingMatchesFormulasDouble) {
  for (const auto& s : kShapes)
    for (Activation act : {Activation::none, Activation::relu}) check_training<double>(s, act);
}
TEST(BatchNormKernel, EvalUsesRunningStatistics) {
  for (const auto& s : kShapes)
    for (Activation act : {Activation::none, Activation::relu}) {
      check_eval<float>(s, act);
      check_eval<double>(s, act);
    }
}

// A single value per channel: the unbiased variance would divide by zero; the kernel keeps the
// biased one (0) so running_var stays finite.
TEST(BatchNormKernel, OneValuePerChannelKeepsRunningVarFinite) {
  const BatchNormShape s{1, 2, 1};
  std::vector<float> x{3.f, -1.f}, gamma{1.f, 1.f}, beta{0.f, 0.f}, rm{0.f, 0.f}, rv{1.f, 1.f};
  auto y = test::poisoned<float>(2), mean = test::poisoned<float>(2), invstd = test::poisoned<float>(2);
  batch_norm_forward_train<float>(s, x.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rm.data(), rv.data(),
                                 y.data(), mean.data(), invstd.data());
  EXPECT_EQ(y, (std::vector<float>{0.f, 0.f}));
  EXPECT_FLOAT_EQ(rv[0], 0.9f);
  EXPECT_FLOAT_EQ(rm[0], 0.3f);
}

TEST(BatchNormKernel, BitIdenticalForOneAndTwoThreads) {
  const BatchNormShape s{16, 8, 100};
  const auto x = randn<float>(12800, 5), dy = randn<float>(12800, 6), g = randn<float>(8, 7), b = randn<float>(8, 8);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> y(12800), m(8), is(8), dx(12800), dg(8), dbt(8), rm(8, 0.f), rv(8, 1.f);
    batch_norm_forward_train<float>(s, x.data(), g.data(), b.data(), 1e-5f, 0.1f, rm.data(), rv.data(), y.data(),
                                   m.data(), is.data(), Activation::relu);
    batch_norm_backward_train<float>(s, dy.data(), x.data(), g.data(), m.data(), is.data(), dx.data(), dg.data(),
                                    dbt.data(), y.data());
    for (const auto* v : {&dx, &dg, &dbt, &rm, &rv, &m, &is}) y.insert(y.end(), v->begin(), v->end());
    return y;
  };
  const auto one = run(1), two = run(2);
  omp_set_num_threads(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
}

}  // namespace
}  // namespace cg::kernels::cpu
