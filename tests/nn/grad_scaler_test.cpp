// The loss scaler's state machine (PyTorch GradScaler's rules), on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/ops.h"
#include "nn/grad_scaler.h"

namespace cg::nn {
namespace {

struct Fixture {
  Tensor p = Tensor::from_vector<float>({1.f, 2.f}, {2}).set_requires_grad(true);
  NamedTensors params{{"p", p}};
  SGD sgd{params, {1.0f, 0.f, 0.f, 0.f, false}};
  void set_grad(float a, float b) { p.set_grad(Tensor::from_vector<float>({a, b}, {2})); }
};

TEST(GradScaler, DefaultsAreGradScalers) {
  GradScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, UnscalesThenSteps) {
  Fixture f;
  GradScaler s({8.0, 2.0, 0.5, 3});
  f.set_grad(8.f, -16.f);  // scaled gradients of 1 and -2
  EXPECT_TRUE(s.step(f.sgd, 1.0));
  EXPECT_EQ(f.p.to_vector<float>(), (std::vector<float>{0.f, 4.f}));
  EXPECT_EQ(s.growth_tracker(), 1);
}

TEST(GradScaler, OverflowSkipsTheStepAndBacksOff) {
  Fixture f;
  GradScaler s({8.0, 2.0, 0.5, 3});
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    f.set_grad(bad, 1.f);
    EXPECT_FALSE(s.step(f.sgd, 1.0));
    EXPECT_EQ(f.p.to_vector<float>(), (std::vector<float>{1.f, 2.f}));  // untouched
  }
  EXPECT_EQ(s.scale(), 2.0);  // 8 -> 4 -> 2
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, GrowsAfterTheIntervalOfCleanSteps) {
  Fixture f;
  GradScaler s({8.0, 2.0, 0.5, 3});
  for (int i = 0; i < 2; ++i) {
    f.set_grad(0.f, 0.f);
    s.step(f.sgd, 1.0);
  }
  EXPECT_EQ(s.scale(), 8.0);
  f.set_grad(0.f, 0.f);
  s.step(f.sgd, 1.0);
  EXPECT_EQ(s.scale(), 16.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  // An overflow in the middle of a clean run resets the count.
  s.update(false);
  s.update(true);
  EXPECT_EQ(s.scale(), 8.0);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 8.0);
}

TEST(GradScaler, RanksAgreeOnOverflow) {
  Fixture f;
  GradScaler s({8.0, 2.0, 0.5, 3});
  f.set_grad(8.f, 8.f);  // finite here, but another rank overflowed
  EXPECT_FALSE(s.step(f.sgd, 1.0, [](Tensor& found_inf) { found_inf.fill_(1.0); }));
  EXPECT_EQ(f.p.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(s.scale(), 4.0);
}

TEST(GradScaler, BackwardScalesTheSeedGradient) {
  Tensor w = Tensor::from_vector<float>({3.f}, {1}).set_requires_grad(true);
  GradScaler s({8.0, 2.0, 0.5, 3});
  s.backward(ops::reshape(ops::scale(w, 2.0), {}));  // d(2w)/dw = 2, times the scale 8
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{16.f}));
}

TEST(GradScaler, LoadRestoresTheState) {
  GradScaler s;
  s.load(1024.0, 7);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.growth_tracker(), 7);
  EXPECT_FALSE(s.last_step_skipped());
}

}  // namespace
}  // namespace cg::nn
