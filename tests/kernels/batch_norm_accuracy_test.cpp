// Issue 26: the CPU batch norm's sums are as exact as PyTorch's, which accumulates them in
// double. Ill-conditioned float32 channels (a 256x256 plane of 1e4 + noise of 0.1: the mean is
// 1e5 standard deviations from zero; a gradient of +-1000 halves that nearly cancel) give mean,
// variance (running_var, invstd), dbeta and dgamma within one float32 ulp of the exact
// computation of the same inputs: correctly rounded but for ties. Summed in float lanes (the old
// accumulation), every one of them misses in every channel: the mean by about 240 ulps, dgamma by
// 7 to 280, the variance by 1e7 and more, dbeta by 1e6 and more. SyncBatchNorm's phases sum the
// same way; their variance goes through sum x^2 (the collective adds moments), which in double
// keeps it to a relative (mean / sd)^2 * 2^-52.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/batch_norm.h"

namespace cg::kernels::cpu {
namespace {

constexpr BatchNormShape kShape{1, 4, 256 * 256};  // a 256x256 plane per channel: 4096 values per float lane
constexpr float kEps = 1e-5f, kGradScale = 1000.f;

struct IllConditioned {
  std::vector<float> x, dy, gamma, beta;
};

// Channel c: x = (1e4 + 1e3 c + 0.3) + N(0, 0.1) (a float sum of 4096 of them rounds to multiples
// of 4, so each addition drops the 0.3 and the noise). dy = +1000 over the first half of each plane and
// -1000 over the second, plus N(0, 0.01): its sum is that of the small noise alone.
IllConditioned make_inputs() {
  const BatchNormShape& s = kShape;
  std::mt19937_64 gen(26);
  std::normal_distribution<double> noise(0.0, 1.0);
  IllConditioned in{std::vector<float>(size_t(s.n * s.c * s.hw)), std::vector<float>(size_t(s.n * s.c * s.hw)),
                    std::vector<float>(size_t(s.c), 1.5f), std::vector<float>(size_t(s.c), 0.25f)};
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t j = 0; j < s.hw; ++j) {
        const size_t at = size_t((i * s.c + c) * s.hw + j);
        in.x[at] = float(1e4 + 1e3 * double(c) + 0.3 + 0.1 * noise(gen));
        in.dy[at] = float((j < s.hw / 2 ? kGradScale : -kGradScale) + 0.01 * noise(gen));
      }
  return in;
}

// Channel c's values, in long double (exact for these sums: 64-bit significands).
template <typename F>
long double channel_sum(const BatchNormShape& s, int64_t c, F term) {
  long double sum = 0;
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t j = 0; j < s.hw; ++j) sum += term(size_t((i * s.c + c) * s.hw + j));
  return sum;
}

// |got - want| in units of the float32 spacing at want.
double ulps_off(float got, double want) {
  const float rounded = float(want);
  const double ulp = double(std::nextafter(std::fabs(rounded), INFINITY)) - double(std::fabs(rounded));
  return std::fabs(double(got) - want) / ulp;
}

struct Reference {
  double mean, var_biased, var_unbiased, dbeta, dgamma;
};

// The float64 computation: statistics from the inputs, gradient sums from the inputs and the
// kernel's own saved mean and invstd (the backward is defined in terms of them).
Reference reference(const IllConditioned& in, int64_t c, float save_mean, float save_invstd) {
  const BatchNormShape& s = kShape;
  const long double m = s.n * s.hw;
  const long double mean = channel_sum(s, c, [&](size_t k) { return (long double)in.x[k]; }) / m;
  const long double sq = channel_sum(s, c, [&](size_t k) {
    const long double d = (long double)in.x[k] - mean;
    return d * d;
  });
  const long double dbeta = channel_sum(s, c, [&](size_t k) { return (long double)in.dy[k]; });
  const long double dgamma = channel_sum(s, c, [&](size_t k) {
    return (long double)in.dy[k] * ((long double)in.x[k] - (long double)save_mean);
  }) * (long double)save_invstd;
  return {double(mean), double(sq / m), double(sq / (m - 1)), double(dbeta), double(dgamma)};
}

TEST(BatchNormAccuracy, IllConditionedChannelIsWithinOneUlpOfFloat64) {
  const BatchNormShape& s = kShape;
  const IllConditioned in = make_inputs();
  const size_t c_count = size_t(s.c), size = in.x.size();
  // momentum 1: the running statistics are the batch's, rounded to float (the unbiased variance).
  std::vector<float> running_mean(c_count, 0.f), running_var(c_count, 1.f), y(size), mean(c_count), invstd(c_count);
  batch_norm_forward_train<float>(s, in.x.data(), in.gamma.data(), in.beta.data(), kEps, 1.f, running_mean.data(),
                                 running_var.data(), y.data(), mean.data(), invstd.data());
  std::vector<float> dx(size), dgamma(c_count), dbeta(c_count);
  batch_norm_backward_train<float>(s, in.dy.data(), in.x.data(), in.gamma.data(), mean.data(), invstd.data(),
                                  dx.data(), dgamma.data(), dbeta.data());
  for (int64_t c = 0; c < s.c; ++c) {
    SCOPED_TRACE(testing::Message() << "channel " << c);
    const Reference want = reference(in, c, mean[size_t(c)], invstd[size_t(c)]);
    EXPECT_LE(ulps_off(mean[size_t(c)], want.mean), 1.0) << mean[size_t(c)] << " vs " << want.mean;
    EXPECT_LE(ulps_off(running_var[size_t(c)], want.var_unbiased), 1.0)
        << running_var[size_t(c)] << " vs " << want.var_unbiased;
    EXPECT_LE(ulps_off(invstd[size_t(c)], 1.0 / std::sqrt(want.var_biased + double(kEps))), 1.0);
    EXPECT_LE(ulps_off(dbeta[size_t(c)], want.dbeta), 1.0) << dbeta[size_t(c)] << " vs " << want.dbeta;
    EXPECT_LE(ulps_off(dgamma[size_t(c)], want.dgamma), 1.0) << dgamma[size_t(c)] << " vs " << want.dgamma;
  }
}

// SyncBatchNorm's phases with one replica on the same channel: the mean and the gradient sums
// as exact as above; the variance from summed moments within its documented bound.
TEST(BatchNormAccuracy, SyncPhasesOnTheIllConditionedChannel) {
  const BatchNormShape& s = kShape;
  const IllConditioned in = make_inputs();
  const size_t c_count = size_t(s.c), size = in.x.size();
  std::vector<double> moments(2 * c_count + 1), sums(2 * c_count);
  batch_norm_local_moments<float>(s, in.x.data(), moments.data());
  std::vector<float> running_mean(c_count, 0.f), running_var(c_count, 1.f), y(size), mean(c_count), invstd(c_count);
  batch_norm_forward_with_moments<float>(s, in.x.data(), in.gamma.data(), in.beta.data(), kEps, 1.f, moments.data(),
                                        running_mean.data(), running_var.data(), y.data(), mean.data(),
                                        invstd.data());
  std::vector<float> dx(size), dgamma(c_count), dbeta(c_count);
  batch_norm_local_grad_sums<float>(s, in.dy.data(), in.x.data(), mean.data(), invstd.data(), dgamma.data(),
                                   dbeta.data(), sums.data(), dx.data());
  for (int64_t c = 0; c < s.c; ++c) {
    SCOPED_TRACE(testing::Message() << "channel " << c);
    const Reference want = reference(in, c, mean[size_t(c)], invstd[size_t(c)]);
    EXPECT_LE(ulps_off(mean[size_t(c)], want.mean), 1.0) << mean[size_t(c)] << " vs " << want.mean;
    const double conditioning = want.mean * want.mean / want.var_biased;  // (mean / sd)^2
    EXPECT_NEAR(double(running_var[size_t(c)]), want.var_unbiased,
                want.var_unbiased * (conditioning * 0x1p-52 * 4 + 0x1p-23));
    EXPECT_LE(ulps_off(dbeta[size_t(c)], want.dbeta), 1.0) << dbeta[size_t(c)] << " vs " << want.dbeta;
    EXPECT_LE(ulps_off(dgamma[size_t(c)], want.dgamma), 1.0) << dgamma[size_t(c)] << " vs " << want.dgamma;
  }
}

}  // namespace
}  // namespace cg::kernels::cpu
