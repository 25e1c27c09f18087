#include "util/trace.h"

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/atomic_file.h"

namespace cg::trace {
namespace {

struct Event {
  std::string name, track;
  Clock::time_point start, end;
};

std::atomic<bool> g_enabled{false};
std::mutex g_mutex;
std::vector<Event> g_events;
const Clock::time_point g_origin = Clock::now();

double micros(Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - g_origin).count(); }

}  // namespace

void set_enabled(bool on) { g_enabled = on; }
bool enabled() { return g_enabled; }

void record(const std::string& name, const std::string& track, Clock::time_point start, Clock::time_point end) {
  if (!g_enabled) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.push_back({name, track, start, end});
}

void write_chrome_trace(const std::string& path, int pid) {
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int> tids;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Event& e : g_events) {
    auto [it, fresh] = tids.emplace(e.track, int(tids.size()));
    if (fresh)  // name the track once
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", it->second},
                        {"args", {{"name", e.track}}}});
    events.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.track}, {"pid", pid}, {"tid", it->second},
                      {"ts", micros(e.start)}, {"dur", micros(e.end) - micros(e.start)}});
  }
  write_file_atomically(path, nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump());
}

void clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.clear();
}

Span::Span(std::string name, std::string track) : on_(g_enabled) {
  if (!on_) return;
  name_ = std::move(name);
  track_ = std::move(track);
  start_ = Clock::now();
}

Span::~Span() {
  if (on_) record(name_, track_, start_, Clock::now());
}

}  // namespace cg::trace
