// Optimizer updates against torch.optim: the expected values below were printed by PyTorch 1.13
// (/usr/bin/python3) running SGD / AdamW for three steps on p = [1, -2, 0.5] with gradients
// [0.1, 0.2, -0.3] * step, the same inputs as here.
#include <gtest/gtest.h>

#include "kernels/cpu/optim.h"

namespace cg::kernels::cpu {
namespace {

using Steps = std::vector<std::vector<float>>;

std::vector<float> grad_at(int step) { return {0.1f * float(step), 0.2f * float(step), -0.3f * float(step)}; }

void expect_steps(const Steps& got, const Steps& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s)
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[s][i], want[s][i], 2e-6) << "step " << s + 1 << " element " << i;
}

Steps run_sgd(const SgdParams& h) {
  std::vector<float> p{1.f, -2.f, 0.5f}, buf(3);
  Steps out;
  for (int s = 1; s <= 3; ++s) {
    auto g = grad_at(s);
    sgd_update(3, h, s == 1, p.data(), g.data(), h.momentum != 0 ? buf.data() : nullptr);
    out.push_back(p);
  }
  return out;
}

TEST(SgdKernel, MomentumAndWeightDecayMatchPyTorch) {
  expect_steps(run_sgd({0.1f, 0.9f, 0.01f, 0.f, false}),
               {{0.989000022f, -2.01799989f, 0.529500008f},
                {0.958111048f, -2.07218194f, 0.615520537f},
                {0.899352849f, -2.17887354f, 0.78232348f}});
}

TEST(SgdKernel, NesterovMatchesPyTorch) {
  expect_steps(run_sgd({0.1f, 0.9f, 0.01f, 0.f, true}),
               {{0.979099989f, -2.03419995f, 0.556050003f},
                {0.93032968f, -2.12091494f, 0.692888498f},
                {0.846549988f, -2.27475953f, 0.932227135f}});
}

TEST(SgdKernel, PlainSgdNeedsNoBuffer) {
  expect_steps(run_sgd({0.1f, 0.f, 0.f, 0.f, false}),
               {{0.99000001f, -2.01999998f, 0.530000031f},
                {0.970000029f, -2.05999994f, 0.590000033f},
                {0.939999998f, -2.11999989f, 0.680000067f}});
}

TEST(AdamWKernel, BiasCorrectionAndDecoupledDecayMatchPyTorch) {
  AdamWParams h;
  h.lr = 0.01f;
  h.weight_decay = 0.1f;
  std::vector<float> p{1.f, -2.f, 0.5f}, m(3, 0.f), v(3, 0.f);
  Steps out;
  for (int s = 1; s <= 3; ++s) {
    auto g = grad_at(s);
    adamw_update(3, h, s, p.data(), g.data(), m.data(), v.data());
    out.push_back(p);
  }
  expect_steps(out, {{0.989000022f, -2.00800014f, 0.509500027f},
                     {0.978359222f, -2.01564407f, 0.518642366f},
                     {0.967800856f, -2.02320838f, 0.527703762f}});
}

}  // namespace
}  // namespace cg::kernels::cpu
