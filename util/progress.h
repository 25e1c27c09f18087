// A one-line progress bar for a terminal ("epoch 2/3 [#####.....] 412/938 loss 0.31 ..."),
// redrawn in place; when stdout is not a terminal (CI, files, pipes) it prints nothing and the
// caller's periodic log lines carry the progress instead.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace cg {

class ProgressBar {
 public:
  // enabled: draw at all (rank 0 on a terminal); total: steps in the bar.
  ProgressBar(bool enabled, std::string label, int64_t total);
  ~ProgressBar();
  void update(int64_t done, const std::string& status);
  void finish();  // ends the line so later output starts clean
  bool enabled() const { return enabled_; }
  static bool stdout_is_terminal();

 private:
  bool enabled_, open_ = false;
  std::string label_;
  int64_t total_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace cg
