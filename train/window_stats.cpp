#include "train/window_stats.h"

#include <cmath>

namespace cg::train {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void WindowStats::add(const Tensor& loss, const Tensor& hits, int64_t images) {
  losses_.push_back(loss.detach());
  hits_.push_back(hits);
  sizes_.push_back(images);
}

WindowSums WindowStats::flush(int64_t last_step) {
  WindowSums s;
  for (size_t i = 0; i < losses_.size(); ++i) {
    const double loss = losses_[i].item();  // the first read waits for the device; the rest are ready
    CG_CHECK(std::isfinite(loss), "loss became {} in the {} micro-batches up to step {}; lower optim.lr?", loss,
             losses_.size(), last_step);
    s.loss_sum += loss * double(sizes_[i]);
    s.correct += hits_[i].item();
    s.images += double(sizes_[i]);
  }
  losses_.clear();
  hits_.clear();
  sizes_.clear();
  return s;
}

}  // namespace cg::train
