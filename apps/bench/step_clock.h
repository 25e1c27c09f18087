// Timestamps at the phase boundaries of many steps, read only at the end: CUDA events recorded
// on the compute stream on a GPU (so no step waits for the host), the wall clock on the CPU.
#pragma once
#include <chrono>
#include <vector>

#include "engine/stream.h"

namespace cg::apps {

class StepClock {
 public:
  StepClock(Device device, Stream stream) : device_(device), stream_(std::move(stream)) {}

  void mark() {
    if (device_.is_cuda()) {
      Event e = Event::create(device_, {.timing = true});
      e.record(stream_);
      events_.push_back(e);
    } else {
      times_.push_back(std::chrono::steady_clock::now());
    }
  }

  // From the first mark to the last: every timed step with the gaps between them.
  double span_ms() const {
    const size_t n = device_.is_cuda() ? events_.size() : times_.size();
    return n < 2 ? 0.0 : between(0, n - 1);
  }

  // Consecutive groups of `marks_per_step` marks: for each, the marks_per_step - 1 intervals in
  // milliseconds. Call after the stream has finished.
  std::vector<std::vector<double>> intervals_ms(size_t marks_per_step) const {
    std::vector<std::vector<double>> out;
    const size_t n = device_.is_cuda() ? events_.size() : times_.size();
    for (size_t first = 0; first + marks_per_step <= n; first += marks_per_step) {
      std::vector<double> step;
      for (size_t i = first; i + 1 < first + marks_per_step; ++i) step.push_back(between(i, i + 1));
      out.push_back(step);
    }
    return out;
  }

 private:
  double between(size_t a, size_t b) const {
    if (device_.is_cuda()) return Event::elapsed_ms(events_[a], events_[b]);
    return std::chrono::duration<double, std::milli>(times_[b] - times_[a]).count();
  }

  Device device_;
  Stream stream_;
  std::vector<Event> events_;
  std::vector<std::chrono::steady_clock::time_point> times_;
};

}  // namespace cg::apps
