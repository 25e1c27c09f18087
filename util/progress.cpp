#include "util/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace cg {

bool ProgressBar::stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, int64_t total, Options options)
    : enabled_(options.draw), label_(std::move(label)), total_(total) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, const std::string& status) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // Redraw at most 10 times a second; terminals are slow and the step loop is not.
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? int(kWidth * done / total_) : kWidth;
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stdout, "\r%s [%s] %lld/%lld %s\x1b[K", label_.c_str(), bar.c_str(),
               (long long)done, (long long)total_, status.c_str());
  std::fflush(stdout);
  open_ = true;
}

void ProgressBar::finish() {
  if (open_) std::fputc('\n', stdout);
  open_ = false;
}

}  // namespace cg
