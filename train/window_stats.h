// Loss, correct predictions and images since the last log line. The per-step values are tensors
// on the training device and are read only when the window is flushed, so on a GPU the host
// waits for the device once per log interval instead of once per step. Windows are timed by the
// steady clock below.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace cg::train {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t);

struct WindowSums {
  double loss_sum = 0;  // sum over images of the loss
  double correct = 0, images = 0;
};

class WindowStats {
 public:
  // loss: the batch's mean loss (one float); hits: its correct count (one int64).
  void add(const Tensor& loss, const Tensor& hits, int64_t images);
  bool empty() const { return losses_.empty(); }
  // Reads everything added since the last flush and starts a new window. Fails when a loss is not
  // finite, naming the steps the window covered.
  WindowSums flush(int64_t last_step);

 private:
  std::vector<Tensor> losses_, hits_;
  std::vector<int64_t> sizes_;
};

}  // namespace cg::train
