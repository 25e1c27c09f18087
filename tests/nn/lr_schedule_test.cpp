// Schedules against values computed independently in Python: the cosine ones by PyTorch 1.13's
// own torch.optim.lr_scheduler.CosineAnnealingLR, the others with the math module; all pasted
// here as literals.
#include <gtest/gtest.h>

#include "nn/lr_schedule.h"
#include "util/check.h"

namespace cg::nn {
namespace {

ScheduleOptions options(ScheduleKind kind, double base_lr, double min_lr, int64_t warmup_steps, int64_t total_steps,
                        int64_t steps_per_epoch, int64_t epochs) {
  ScheduleOptions o;
  o.kind = kind;
  o.base_lr = base_lr;
  o.min_lr = min_lr;
  o.warmup_steps = warmup_steps;
  o.total_steps = total_steps;
  o.steps_per_epoch = steps_per_epoch;
  o.epochs = epochs;
  return o;
}

TEST(LrSchedule, ConstantNeverChanges) {
  const LrSchedule s(options(ScheduleKind::constant, 0.1, 0.0, 0, 100, 10, 10));
  for (int64_t step : {0, 1, 57, 99, 100, 100000}) EXPECT_EQ(s.lr_at(step), 0.1) << step;
}

TEST(LrSchedule, CosineMatchesCosineAnnealingLRSteppedPerEpoch) {
  // torch: SGD(lr=0.2) + CosineAnnealingLR(T_max=4, eta_min=0.01), sched.step() once per epoch:
  // the lr of epochs 0..4 printed as 0.2, 0.172175144212722, 0.10499999999999998,
  // 0.03782485578727799, 0.01.
  const double per_epoch[] = {0.2, 0.172175144212722, 0.10499999999999998, 0.03782485578727799, 0.01};
  const LrSchedule s(options(ScheduleKind::cosine, 0.2, 0.01, 0, 12, 3, 4));
  for (int64_t step = 0; step < 15; ++step)
    EXPECT_NEAR(s.lr_at(step), per_epoch[step / 3], 1e-15) << "step " << step;
  EXPECT_NEAR(s.lr_at(1000), 0.01, 1e-15) << "after the last epoch the rate stays at min_lr";
}

TEST(LrSchedule, CosineWithoutFloorOverThreeEpochs) {
  // 0.1 * (1 + cos(pi * e / 3)) / 2 for e = 0, 1, 2: 0.1, 0.075, 0.025 (exact halves and quarters).
  const LrSchedule s(options(ScheduleKind::cosine, 0.1, 0.0, 0, 15, 5, 3));
  for (int step = 0; step < 5; ++step) EXPECT_NEAR(s.lr_at(step), 0.1, 1e-15);
  for (int step = 5; step < 10; ++step) EXPECT_NEAR(s.lr_at(step), 0.075, 1e-15);
  for (int step = 10; step < 15; ++step) EXPECT_NEAR(s.lr_at(step), 0.025, 1e-15);
}

TEST(LrSchedule, WarmupRampsLinearlyThenCosineToTheFloor) {
  // base 0.2, min 0.01, 3 warm-up steps, 8 in all; python: 0.2*(s+1)/3, then
  // 0.01 + 0.19*(1+cos(pi*(s-3)/5))/2.
  const double want[] = {0.06666666666666667, 0.13333333333333333, 0.2,  0.2,  0.18185661446562001,
                         0.13435661446562,    0.07564338553437999, 0.028143385534380005, 0.01, 0.01};
  const LrSchedule s(options(ScheduleKind::warmup_cosine, 0.2, 0.01, 3, 8, 4, 2));
  for (int step = 0; step < 10; ++step) EXPECT_NEAR(s.lr_at(step), want[step], 1e-15) << "step " << step;
}

TEST(LrSchedule, WarmupOfFourStepsToZero) {
  // 4 warm-up steps, 10 in total: 0.025 0.05 0.075 0.1, then 0.1*(1+cos(pi*(s-4)/6))/2.
  const LrSchedule s(options(ScheduleKind::warmup_cosine, 0.1, 0.0, 4, 10, 5, 2));
  const double want[] = {0.025, 0.05, 0.075, 0.1, 0.1, 0.09330127018922195, 0.075, 0.05,
                         0.025, 0.006698729810778065, 0.0};
  for (int step = 0; step <= 10; ++step) EXPECT_NEAR(s.lr_at(step), want[step], 1e-15) << "step " << step;
}

TEST(LrSchedule, NoWarmupStartsAtTheBaseRate) {
  const LrSchedule s(options(ScheduleKind::warmup_cosine, 0.1, 0.01, 0, 10, 10, 1));
  EXPECT_NEAR(s.lr_at(0), 0.1, 1e-15);
  EXPECT_NEAR(s.lr_at(5), 0.055, 1e-15);  // halfway: the mean of base and floor
  EXPECT_NEAR(s.lr_at(10), 0.01, 1e-15);
}

TEST(LrSchedule, WarmupLongerThanTheRunIsAllWarmup) {
  const LrSchedule s(options(ScheduleKind::warmup_cosine, 0.1, 0.0, 20, 10, 10, 1));
  EXPECT_NEAR(s.lr_at(0), 0.005, 1e-15);
  EXPECT_NEAR(s.lr_at(9), 0.05, 1e-15);
}

TEST(LrSchedule, InvalidOptionsAndStepsAreRejected) {
  EXPECT_THROW(LrSchedule(options(ScheduleKind::cosine, -0.1, 0.0, 0, 10, 10, 1)), Error);
  EXPECT_THROW(LrSchedule(options(ScheduleKind::cosine, 0.1, 0.2, 0, 10, 10, 1)), Error);
  EXPECT_THROW(LrSchedule(options(ScheduleKind::cosine, 0.1, 0.0, 0, 10, 0, 1)), Error);
  EXPECT_THROW(LrSchedule(options(ScheduleKind::cosine, 0.1, 0.0, 0, 10, 10, 0)), Error);
  EXPECT_THROW(LrSchedule(options(ScheduleKind::warmup_cosine, 0.1, 0.0, -1, 10, 10, 1)), Error);
  const LrSchedule s(options(ScheduleKind::constant, 0.1, 0.0, 0, 10, 10, 1));
  EXPECT_THROW(s.lr_at(-1), Error);
}

}  // namespace
}  // namespace cg::nn
