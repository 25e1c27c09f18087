// Schedules against values computed by hand (python's math module, written here as literals).
#include <gtest/gtest.h>

#include "nn/lr_schedule.h"

namespace cg::nn {
namespace {

TEST(LrSchedule, ConstantNeverChanges) {
  LrSchedule s({ScheduleKind::constant, 0.1, 0.0, 0, 100, 10, 10});
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(99), 0.1);
}

TEST(LrSchedule, CosineStepsOncePerEpochLikeCosineAnnealingLR) {
  // 3 epochs of 5 steps: epoch e uses 0.1 * (1 + cos(pi e / 3)) / 2 = 0.1, 0.075, 0.025.
  LrSchedule s({ScheduleKind::cosine, 0.1, 0.0, 0, 15, 5, 3});
  for (int step = 0; step < 5; ++step) EXPECT_NEAR(s.lr_at(step), 0.1, 1e-12);
  for (int step = 5; step < 10; ++step) EXPECT_NEAR(s.lr_at(step), 0.075, 1e-12);
  for (int step = 10; step < 15; ++step) EXPECT_NEAR(s.lr_at(step), 0.025, 1e-12);
}

TEST(LrSchedule, WarmupThenCosinePerStep) {
  // 4 warm-up steps, 10 in total: 0.025 0.05 0.075 0.1, then cosine over 6 steps to 0.
  LrSchedule s({ScheduleKind::warmup_cosine, 0.1, 0.0, 4, 10, 5, 2});
  const double want[] = {0.025, 0.05, 0.075, 0.1, 0.1, 0.09330127018922195, 0.075, 0.05,
                         0.025, 0.006698729810778065, 0.0};
  for (int step = 0; step <= 10; ++step) EXPECT_NEAR(s.lr_at(step), want[step], 1e-12) << "step " << step;
}

TEST(LrSchedule, MinLrIsTheFloor) {
  LrSchedule s({ScheduleKind::warmup_cosine, 0.1, 0.01, 0, 10, 10, 1});
  EXPECT_NEAR(s.lr_at(10), 0.01, 1e-12);
  EXPECT_NEAR(s.lr_at(5), 0.055, 1e-12);
}

}  // namespace
}  // namespace cg::nn
