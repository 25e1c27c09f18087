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
  struct Options {
    bool draw = true;  // false: the bar prints nothing (not rank 0, or not a terminal)
  };
  // total: steps in the bar.
  ProgressBar(std::string label, int64_t total, Options options);
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
