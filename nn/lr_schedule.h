// Learning-rate schedules as pure functions of the optimizer step, so a resumed run needs only
// the step count to continue the curve exactly. step counts optimizer steps already taken (0 for
// the first update).
//   constant:       base_lr.
//   cosine:         PyTorch's CosineAnnealingLR(T_max=epochs, eta_min=min_lr) stepped once per
//                   epoch, as in the seed article: every step of epoch e = step / steps_per_epoch
//                   (0-based) uses  min_lr + (base_lr - min_lr) * (1 + cos(pi * e / epochs)) / 2.
//                   (PyTorch evaluates a recursive form of the same curve; the two agree to
//                   ~1e-16.) Epochs past the last stay at min_lr instead of rising again.
//   warmup_cosine:  per step s: linear warm-up lr = base_lr * (s + 1) / warmup_steps while
//                   s < warmup_steps (so the last warm-up step reaches base_lr), then
//                   min_lr + (base_lr - min_lr) * (1 + cos(pi * t)) / 2 with
//                   t = (s - warmup_steps) / (total_steps - warmup_steps), reaching min_lr at
//                   s = total_steps and staying there. If warmup_steps >= total_steps the run
//                   is all warm-up.
#pragma once
#include <cstdint>

#include "util/enum_names.h"

namespace cg::nn {

enum class ScheduleKind { constant, cosine, warmup_cosine };
inline EnumNames<ScheduleKind> enum_names(ScheduleKind) {
  return {{ScheduleKind::constant, "constant"}, {ScheduleKind::cosine, "cosine"},
          {ScheduleKind::warmup_cosine, "warmup_cosine"}};
}

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
  // Throws cg::Error on negative rates, min_lr > base_lr (non-constant kinds) or step counts < 1.
  explicit LrSchedule(const ScheduleOptions& options);
  // The learning rate for the update after `step` optimizer steps (step >= 0).
  double lr_at(int64_t step) const;

 private:
  ScheduleOptions o_;
};

}  // namespace cg::nn
