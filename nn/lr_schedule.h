// Learning-rate schedules as pure functions of the optimizer step, so a resumed run needs only
// the step count to continue the curve exactly.
//   constant:       base_lr
//   cosine:         PyTorch's CosineAnnealingLR(T_max=epochs) stepped once per epoch, as in the
//                   seed article: every step of epoch e (0-based) uses
//                   min_lr + (base_lr - min_lr) * (1 + cos(pi * e / epochs)) / 2
//   warmup_cosine:  per step: linear warm-up lr = base_lr * (s + 1) / warmup_steps for
//                   s < warmup_steps, then cosine from base_lr to min_lr over the remaining
//                   total_steps - warmup_steps steps.
#pragma once
#include <cstdint>

namespace cg::nn {

enum class ScheduleKind { constant, cosine, warmup_cosine };

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::constant;
  double base_lr = 0.1;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;      // optimizer steps in the whole run
  int64_t steps_per_epoch = 1;  // optimizer steps per epoch
  int64_t epochs = 1;
};

class LrSchedule {
 public:
  explicit LrSchedule(const ScheduleOptions& options);
  double lr_at(int64_t step) const;  // step: optimizer steps taken before this one (0-based)

 private:
  ScheduleOptions o_;
};

}  // namespace cg::nn
