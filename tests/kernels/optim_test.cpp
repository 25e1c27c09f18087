// Optimizer updates against torch.optim. The expected values are printed by
// tests/golden/make_optim_values.py (PyTorch 1.13, /usr/bin/python3): torch.optim.SGD /
// torch.optim.AdamW with the same hyper-parameters for three steps on p = [1, -2, 0.5] with
// gradients [0.1, 0.2, -0.3] * step (step = 1, 2, 3), p.tolist() with "%.9g" after each step.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/parallel.h"
#include "util/check.h"

namespace cg::kernels::cpu {
namespace {

using Steps = std::vector<std::vector<float>>;

std::vector<float> grad_at(int step) { return {0.1f * float(step), 0.2f * float(step), -0.3f * float(step)}; }

// Hyper-parameters are floats here and doubles in PyTorch, so allow a few float ulps.
void expect_steps(const Steps& got, const Steps& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s)
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[s][i], want[s][i], 1e-6) << "step " << s + 1 << " element " << i;
}

SgdOptions sgd(float lr, float momentum, float weight_decay, float dampening, bool nesterov) {
  SgdOptions h;
  h.lr = lr;
  h.momentum = momentum;
  h.weight_decay = weight_decay;
  h.dampening = dampening;
  h.nesterov = nesterov;
  return h;
}

Steps run_sgd(const SgdOptions& h, std::vector<float>* buffer_after_first = nullptr) {
  std::vector<float> p{1.f, -2.f, 0.5f}, buf(3, 123.f);  // garbage: the first step must overwrite it
  Steps out;
  for (int s = 1; s <= 3; ++s) {
    auto g = grad_at(s);
    sgd_update(3, h, s == 1, p.data(), g.data(), h.momentum != 0 ? buf.data() : nullptr);
    if (s == 1 && buffer_after_first) *buffer_after_first = buf;
    out.push_back(p);
  }
  return out;
}

TEST(SgdKernel, PlainSgdNeedsNoBuffer) {
  // torch.optim.SGD(lr=0.1)
  expect_steps(run_sgd(sgd(0.1f, 0.f, 0.f, 0.f, false)), {{0.99000001f, -2.01999998f, 0.530000031f},
                                                          {0.970000029f, -2.05999994f, 0.590000033f},
                                                          {0.939999998f, -2.11999989f, 0.680000067f}});
}

TEST(SgdKernel, WeightDecayWithoutMomentumMatchesPyTorch) {
  // torch.optim.SGD(lr=0.1, weight_decay=0.5)
  expect_steps(run_sgd(sgd(0.1f, 0.f, 0.5f, 0.f, false)), {{0.939999998f, -1.91999996f, 0.504999995f},
                                                           {0.872999966f, -1.86399996f, 0.53974998f},
                                                           {0.799349964f, -1.83079994f, 0.602762461f}});
}

TEST(SgdKernel, MomentumAndWeightDecayMatchPyTorch) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01)
  std::vector<float> buf;
  expect_steps(run_sgd(sgd(0.1f, 0.9f, 0.01f, 0.f, false), &buf), {{0.989000022f, -2.01799989f, 0.529500008f},
                                                                   {0.958111048f, -2.07218194f, 0.615520537f},
                                                                   {0.899352849f, -2.17887354f, 0.78232348f}});
  // First step: the buffer is the decayed gradient itself, g + wd * p = 0.1 + 0.01, 0.2 - 0.02, -0.3 + 0.005.
  EXPECT_FLOAT_EQ(buf[0], 0.11f);
  EXPECT_FLOAT_EQ(buf[1], 0.18f);
  EXPECT_FLOAT_EQ(buf[2], -0.295f);
}

TEST(SgdKernel, FirstStepIgnoresDampeningLikePyTorch) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0.5): step 1 equals plain SGD because the
  // buffer starts as a copy of the gradient; dampening applies from step 2 on.
  std::vector<float> buf;
  expect_steps(run_sgd(sgd(0.1f, 0.9f, 0.f, 0.5f, false), &buf), {{0.99000001f, -2.01999998f, 0.530000031f},
                                                                  {0.971000016f, -2.05800009f, 0.587000012f},
                                                                  {0.938899994f, -2.12220001f, 0.683300018f}});
  EXPECT_FLOAT_EQ(buf[0], 0.1f);
}

TEST(SgdKernel, NesterovMatchesPyTorch) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
  expect_steps(run_sgd(sgd(0.1f, 0.9f, 0.01f, 0.f, true)), {{0.979099989f, -2.03419995f, 0.556050003f},
                                                            {0.93032968f, -2.12091494f, 0.692888498f},
                                                            {0.846549988f, -2.27475953f, 0.932227135f}});
}

TEST(SgdKernel, RejectsMomentumWithoutBufferAndBadNesterov) {
  std::vector<float> p{1.f}, g{1.f}, buf{0.f};
  EXPECT_THROW(sgd_update(1, sgd(0.1f, 0.9f, 0.f, 0.f, false), true, p.data(), g.data(), nullptr), Error);
  EXPECT_THROW(sgd_update(1, sgd(0.1f, 0.f, 0.f, 0.f, true), true, p.data(), g.data(), buf.data()), Error);
  EXPECT_THROW(sgd_update(1, sgd(0.1f, 0.9f, 0.f, 0.1f, true), true, p.data(), g.data(), buf.data()), Error);
  EXPECT_EQ(p[0], 1.f) << "a rejected call must not touch the parameter";
}

Steps run_adamw(const AdamWOptions& h, std::vector<float>* m_out = nullptr, std::vector<float>* v_out = nullptr) {
  std::vector<float> p{1.f, -2.f, 0.5f}, m(3, 0.f), v(3, 0.f);
  Steps out;
  for (int s = 1; s <= 3; ++s) {
    auto g = grad_at(s);
    adamw_update(3, h, s, p.data(), g.data(), m.data(), v.data());
    out.push_back(p);
  }
  if (m_out) *m_out = m;
  if (v_out) *v_out = v;
  return out;
}

TEST(AdamWKernel, BiasCorrectionAndDecoupledDecayMatchPyTorch) {
  // torch.optim.AdamW(lr=0.01, weight_decay=0.1), default betas (0.9, 0.999) and eps 1e-8.
  // Step 1 moves every element by lr * (1 + ...) regardless of the gradient's size: the bias
  // correction makes m / sqrt(v) = sign(g) on the first step.
  AdamWOptions h;
  h.lr = 0.01f;
  h.weight_decay = 0.1f;
  std::vector<float> m, v;
  expect_steps(run_adamw(h, &m, &v), {{0.989000022f, -2.00800014f, 0.509500027f},
                                      {0.978359222f, -2.01564407f, 0.518642366f},
                                      {0.967800856f, -2.02320838f, 0.527703762f}});
  // PyTorch's exp_avg and exp_avg_sq after step 3. They agree only to ~2.4e-7 and ~1.3e-5
  // relative: PyTorch weighs g by 1 - beta computed from the doubles 0.9 and 0.999, while the
  // float API here only knows 0.9f and 0.999f (1 - 0.999f = 0.00099998713). The same betas enter
  // the bias corrections 1 - beta^t, so the error cancels in the update (parameters match above).
  const float want_m[] = {0.0561000034f, 0.112200007f, -0.168300003f};
  const float want_v[] = {0.000139940021f, 0.000559760083f, 0.00125946023f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(m[size_t(i)], want_m[i], 1e-6 * std::abs(want_m[i])) << i;
    EXPECT_NEAR(v[size_t(i)], want_v[i], 2e-5 * want_v[i]) << i;
  }
}

TEST(AdamWKernel, OtherBetasAndEpsMatchPyTorch) {
  // torch.optim.AdamW(lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=0): a large eps makes
  // the step depend on the gradient's size.
  AdamWOptions h;
  h.lr = 0.05f;
  h.beta1 = 0.8f;
  h.beta2 = 0.9f;
  h.eps = 1e-3f;
  h.weight_decay = 0.f;
  expect_steps(run_adamw(h), {{0.950495064f, -2.04975128f, 0.549833894f},
                              {0.902362585f, -2.09803319f, 0.59816581f},
                              {0.854308128f, -2.14619541f, 0.646364093f}});
}

TEST(AdamWKernel, StepCountsFromOne) {
  std::vector<float> p{1.f}, g{1.f}, m{0.f}, v{0.f};
  EXPECT_THROW(adamw_update(1, AdamWOptions{}, 0, p.data(), g.data(), m.data(), v.data()), Error);
}

// Results must not depend on the number of threads, nor on where the vectorized loops' chunk
// and tail boundaries fall: the same random problem, updated with 1 and with 3 threads, must
// agree bit for bit, and every element must match a plain double-precision evaluation.
TEST(OptimKernels, ThreadCountDoesNotChangeResults) {
  const int64_t n = 3 * kElementwiseGrain + 17;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> p0(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  for (auto& x : p0) x = normal(rng);
  for (auto& x : g) x = normal(rng);

  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> p = p0, buf(static_cast<size_t>(n)), q = p0, m(static_cast<size_t>(n), 0.f), v(static_cast<size_t>(n), 0.f);
    const SgdOptions hs = sgd(0.05f, 0.9f, 1e-4f, 0.f, true);
    AdamWOptions ha;
    for (int s = 1; s <= 3; ++s) {
      sgd_update(n, hs, s == 1, p.data(), g.data(), buf.data());
      adamw_update(n, ha, s, q.data(), g.data(), m.data(), v.data());
    }
    p.insert(p.end(), q.begin(), q.end());
    return p;
  };
  const std::vector<float> one = run(1), three = run(3);
  omp_set_num_threads(2);
  ASSERT_EQ(one.size(), three.size());
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);

  // Independent double-precision AdamW on a few elements, including the tail.
  for (int64_t i : {int64_t(0), kElementwiseGrain - 1, kElementwiseGrain, n - 1}) {
    double p = p0[size_t(i)], m = 0, v = 0;
    for (int s = 1; s <= 3; ++s) {
      const double gi = g[size_t(i)];
      p *= 1 - 1e-3 * 1e-2;
      m = 0.9 * m + 0.1 * gi;
      v = 0.999 * v + 0.001 * gi * gi;
      p -= 1e-3 * (m / (1 - std::pow(0.9, s))) / (std::sqrt(v / (1 - std::pow(0.999, s))) + 1e-8);
    }
    EXPECT_NEAR(one[size_t(n + i)], p, 2e-6) << "element " << i;
  }
}

}  // namespace
}  // namespace cg::kernels::cpu
