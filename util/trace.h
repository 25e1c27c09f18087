// A timeline of what each thread did, written as a Chrome trace (open it in Perfetto or
// chrome://tracing): spans on named tracks, e.g. "compute" (forward, backward, optimizer) and
// "communication" (each bucket's all-reduce), so overlap is visible at a glance. Off by default;
// when off, a Span costs one branch.
#pragma once
#include <chrono>
#include <string>

namespace cg::trace {

using Clock = std::chrono::steady_clock;

void set_enabled(bool on);
bool enabled();
// Records a finished span; thread-safe.
void record(const std::string& name, const std::string& track, Clock::time_point start, Clock::time_point end);
// Writes every span recorded so far as Chrome-trace JSON (process id = `pid`, e.g. the rank).
void write_chrome_trace(const std::string& path, int pid);
void clear();

// Records the span from construction to destruction.
class Span {
 public:
  Span(std::string name, std::string track);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  bool on_;
  std::string name_, track_;
  Clock::time_point start_;
};

}  // namespace cg::trace
