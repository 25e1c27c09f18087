// Learning-rate schedules as closed-form functions of the optimizer step (see lr_schedule.h).
// Rule: no state, so lr_at(step) after a resume equals lr_at(step) in an uninterrupted run.
#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "util/check.h"

namespace cg::nn {
namespace {

// min_lr + (base_lr - min_lr) * (1 + cos(pi * t)) / 2 for t in [0, 1]: base_lr at 0, min_lr at 1.
double cosine_between(double base_lr, double min_lr, double t) {
  return min_lr + (base_lr - min_lr) * (1 + std::cos(std::numbers::pi * t)) / 2;
}

}  // namespace

LrSchedule::LrSchedule(const ScheduleOptions& o) : o_(o) {
  CG_CHECK(o.base_lr >= 0 && o.min_lr >= 0, "learning rates must be >= 0 (base_lr {}, min_lr {})", o.base_lr,
           o.min_lr);
  CG_CHECK(o.min_lr <= o.base_lr || o.kind == ScheduleKind::constant,
           "min_lr {} is above base_lr {}: the schedule would rise", o.min_lr, o.base_lr);
  CG_CHECK(o.steps_per_epoch >= 1 && o.epochs >= 1 && o.total_steps >= 1 && o.warmup_steps >= 0,
           "schedule needs positive step counts (total_steps {}, steps_per_epoch {}, epochs {}, warmup_steps {})",
           o.total_steps, o.steps_per_epoch, o.epochs, o.warmup_steps);
}

double LrSchedule::lr_at(int64_t step) const {
  CG_CHECK(step >= 0, "optimizer step {} is negative", step);
  switch (o_.kind) {
    case ScheduleKind::constant:
      return o_.base_lr;
    case ScheduleKind::cosine: {
      const int64_t epoch = std::min(step / o_.steps_per_epoch, o_.epochs);
      return cosine_between(o_.base_lr, o_.min_lr, double(epoch) / double(o_.epochs));
    }
    case ScheduleKind::warmup_cosine: {
      if (step < o_.warmup_steps) return o_.base_lr * double(step + 1) / double(o_.warmup_steps);
      const int64_t decay_steps = std::max<int64_t>(o_.total_steps - o_.warmup_steps, 1);
      const double t = std::min(double(step - o_.warmup_steps) / double(decay_steps), 1.0);
      return cosine_between(o_.base_lr, o_.min_lr, t);
    }
  }
  CG_FAIL("unknown ScheduleKind {}", int(o_.kind));
}

}  // namespace cg::nn
