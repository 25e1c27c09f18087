#include "dist/device_clock.h"

namespace cg::dist {

DeviceClock::DeviceClock(Device device) : device_(device), idle_(Stream::create(device)) { take_anchor(); }

void DeviceClock::take_anchor() {
  Anchor a;
  a.event = Event::create(device_, {.timing = true});
  const auto before = trace::Clock::now();
  a.event.record(idle_);
  a.event.synchronize();
  a.wait_ended = trace::Clock::now();
  a.host = before + (a.wait_ended - before) / 2;
  anchors_.push_back(a);
  if (anchors_.size() > 8) anchors_.pop_front();
}

void DeviceClock::refresh(std::chrono::seconds every) {
  if (anchors_.empty() || trace::Clock::now() - anchors_.back().wait_ended > every) take_anchor();
}

bool DeviceClock::to_host(const Event& event, trace::Clock::time_point recorded_after,
                          trace::Clock::time_point& out) const {
  for (auto it = anchors_.rbegin(); it != anchors_.rend(); ++it) {
    if (it->wait_ended > recorded_after) continue;
    const double ms = Event::elapsed_ms(it->event, event);
    out = it->host + std::chrono::duration_cast<trace::Clock::duration>(std::chrono::duration<double, std::milli>(ms));
    return true;
  }
  return false;
}

}  // namespace cg::dist
