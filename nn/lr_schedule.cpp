#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "util/check.h"

namespace cg::nn {

LrSchedule::LrSchedule(const ScheduleOptions& o) : o_(o) {
  CG_CHECK(o.base_lr >= 0 && o.min_lr >= 0, "learning rates must be >= 0");
  CG_CHECK(o.steps_per_epoch >= 1 && o.epochs >= 1 && o.total_steps >= 1 && o.warmup_steps >= 0,
           "schedule needs positive step counts");
}

double LrSchedule::lr_at(int64_t step) const {
  const double span = o_.base_lr - o_.min_lr;
  switch (o_.kind) {
    case ScheduleKind::constant:
      return o_.base_lr;
    case ScheduleKind::cosine: {
      const int64_t epoch = std::min(step / o_.steps_per_epoch, o_.epochs);
      return o_.min_lr + span * (1 + std::cos(std::numbers::pi * double(epoch) / double(o_.epochs))) / 2;
    }
    case ScheduleKind::warmup_cosine: {
      if (step < o_.warmup_steps) return o_.base_lr * double(step + 1) / double(o_.warmup_steps);
      const int64_t decay_steps = std::max<int64_t>(o_.total_steps - o_.warmup_steps, 1);
      const double t = std::min(double(step - o_.warmup_steps) / double(decay_steps), 1.0);
      return o_.min_lr + span * (1 + std::cos(std::numbers::pi * t)) / 2;
    }
  }
  return o_.base_lr;
}

}  // namespace cg::nn
